"""Who wrote a memory version, and for an agent's write, the turn it came from.

Every version row (`MemoryItemHistory`) records its source — the agent's `memory` tool in a firing, the owner in the
Memory panel, an API client, staff in admin — and for a tool write the firing, chat run, agent and generation, so a
wrong fact can be traced back to the answer that saved it, undone, or forgotten with the branch it belonged to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SOURCES = ("agent", "owner", "api", "staff", "system")
_EXCERPT_CHARS = 120


@dataclass(frozen=True)
class Provenance:
    source: str
    firing_id: str | None = None
    chat_run_id: int | None = None
    agent_node_id: str = ""
    generation: int | None = None
    # Small facts for display: the prompt the agent was answering (cut), the tool call id, what an undo undid.
    detail: dict = field(default_factory=dict)

    @classmethod
    def of_actor(cls, actor_label: str) -> Provenance:
        """What an actor label alone says ("agent:<node>", "owner:<id>", "staff:<id>", "system:<what>")."""
        kind, _, rest = actor_label.partition(":")
        if kind == "agent":
            return cls("agent", agent_node_id=rest)
        return cls(kind if kind in SOURCES else "system")

    @classmethod
    def of_tool_call(cls, origin: dict) -> Provenance:
        """From what the runtime says of the call (`workflows.nodes.registry.ToolCall.origin`)."""
        prompt = str(origin.get("prompt") or "")
        return cls(
            "agent",
            firing_id=str(origin["firing_id"]) if origin.get("firing_id") else None,
            chat_run_id=origin.get("chat_run_id"),
            agent_node_id=str(origin.get("agent_node_id") or ""),
            generation=origin.get("generation"),
            detail={
                k: v
                for k, v in {
                    "prompt_excerpt": prompt[:_EXCERPT_CHARS] + ("…" if len(prompt) > _EXCERPT_CHARS else ""),
                    "tool_call_id": origin.get("tool_call_id"),
                    "agent_name": origin.get("agent_name"),
                }.items()
                if v
            },
        )

    def with_detail(self, **detail) -> Provenance:
        return Provenance(
            self.source,
            self.firing_id,
            self.chat_run_id,
            self.agent_node_id,
            self.generation,
            {**self.detail, **detail},
        )

    def history_fields(self) -> dict:
        return {
            "source": self.source,
            "firing_id": self.firing_id,
            "chat_run_id": self.chat_run_id,
            "agent_node_id": self.agent_node_id,
            "generation": self.generation,
            "detail": self.detail,
        }
