"""The Memory node type (`simpleMemory`): its params, its `memory` tool and its reset/clear hooks.

Memory owns it, so workflows never imports memory: `MemoryConfig.ready()` registers this spec with the workflows
NodeSpec registry, and the runtime reaches the tool only through the spec's hooks.
"""

from __future__ import annotations

from typing import Literal

from django.urls import reverse
from pydantic import BaseModel, ConfigDict, Field

from workflows.nodes import KIND_TOOL, Handle, NodeSpec, ResetContext

from .provenance import Provenance
from .query_vectors import prefetch_recall_query
from .services import memory_namespace_clear
from .tool import memory_tool_call, memory_tool_definition, memory_tool_step_summary


class SimpleMemoryParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reset_policy: Literal["keep", "clear"] = Field(
        "keep", description="What a Workflow Reset does to this Memory's items: keep them, or clear them."
    )


def _memory_clear(workflow, node: dict, *, actor) -> int:
    return memory_namespace_clear(workflow=workflow, node_id=node["id"], actor=actor)


def _memory_reset(workflow, node: dict, *, policy_context: ResetContext) -> int:
    # Memory survives a Workflow Reset unless the node opted into `clear` (docs/memory.md#reset-policy).
    if (node.get("params") or {}).get("reset_policy", "keep") != "clear":
        return 0
    return _memory_clear(workflow, node, actor=policy_context.actor)


_LEGACY_TRANSCRIPT_KEYS = ("transcript", "history", "markdown", "memory", "chat_history")


def _memory_legacy_upgrade(params: dict) -> tuple[dict, object]:
    """Old `simpleMemory` nodes kept a Markdown transcript (and window settings) in their params.

    The transcript is handed back to become a `legacy_partial` import record, never a Memory item; everything
    but a valid `reset_policy` is dropped."""
    params = params if isinstance(params, dict) else {}
    transcripts: object = None
    per_agent = params.get("transcripts")
    if isinstance(per_agent, dict):
        transcripts = {str(k): v for k, v in per_agent.items() if isinstance(v, str) and v.strip()}
    else:
        for key in _LEGACY_TRANSCRIPT_KEYS:
            value = params.get(key)
            if isinstance(value, str) and value.strip():
                transcripts = value
                break
    kept = {}
    if params.get("reset_policy") in ("keep", "clear"):
        kept["reset_policy"] = params["reset_policy"]
    return kept, transcripts


def _memory_tool_call(call) -> dict:
    return memory_tool_call(
        owner=call.owner,
        workflow=call.workflow,
        node_id=call.node_id,
        arguments=call.arguments,
        idempotency_key=call.idempotency_key,
        actor=call.actor,
        provenance=Provenance.of_tool_call(call.origin) if call.origin else None,
    )


def _memory_panel_url(workflow_id: int, node_id: str) -> str:
    return reverse("memory-panel", kwargs={"workflow_id": workflow_id, "node_id": node_id})


def _memory_tool_prepare(arguments, *, workflow, node_id: str) -> None:
    prefetch_recall_query(arguments, workflow=workflow, node_id=node_id)


SIMPLE_MEMORY = NodeSpec(
    type="simpleMemory",
    label="Memory",
    params_model=SimpleMemoryParams,
    outputs=(Handle("output-tool", KIND_TOOL, label="tool"),),
    tool_name="memory",
    tool_schema=memory_tool_definition,
    tool_call=_memory_tool_call,
    tool_prepare=_memory_tool_prepare,
    tool_step_summary=memory_tool_step_summary,
    reset_execution_state=_memory_reset,
    clear_memory=_memory_clear,
    memory_panel_url=_memory_panel_url,
    legacy_outputs=("output-memory",),
    legacy_upgrade=_memory_legacy_upgrade,
    description="Durable facts the model stores and looks up on purpose through the `memory` tool.",
)
