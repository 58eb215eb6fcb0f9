"""A teammate's tool call: a child firing of the teammate agent. The parent waits in its tool phase; the child's
end sends the parent's `persist_turn` again, which picks the answer up (persist is re-entrant)."""

from __future__ import annotations

from agents import observers
from agents.models import Firing, LlmStep
from agents.services.firings import (
    firing_mark_changed,
    firing_start,
)
from agents.services.teammates import delegation_refusal, teammate_outcome
from agents.tools import (
    ToolOutcome,
)


def teammate_delegate(firing: Firing, step: LlmStep, call: dict, binding: dict) -> ToolOutcome | None:
    child = Firing.objects.filter(parent=firing, parent_tool_call_id=call["id"]).first()
    if child is not None:
        if not child.is_terminal:
            return None
        return teammate_outcome(child)
    task = (call.get("arguments") or {}).get("task") if isinstance(call.get("arguments"), dict) else None
    refusal = delegation_refusal(firing, binding, task)
    if refusal is not None:
        return refusal
    if firing.chat_run_id:
        observers.notify_tool_step(firing=firing, tool_call=call, phase="started")
    # The child carries the chat run too: the run touched the teammate's conversation, so a branch move must
    # know the teammate's cursor (docs/architecture.md#branch-moves).
    firing_start(
        workflow=firing.workflow,
        generation=firing.generation,
        agent_node_id=binding["node_id"],
        prompt=task,
        chat_run=firing.chat_run_id,
        parent=firing,
        parent_tool_call_id=call["id"],
    )
    firing.state = Firing.State.WAITING
    firing_mark_changed(firing, "state")
    return None
