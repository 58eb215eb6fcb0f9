"""Add a teammate: an agent wired as the lead's tool, with a Context of its own."""

from __future__ import annotations

from django.db import transaction

from core.errors import ConflictError, ServiceError

from ..graph import normalize_workflow_graph
from ..locks import workflow_for_update
from ..models import Workflow
from ..nodes import IS_AGENT, IS_CONTEXT_PANEL, KIND_CONTEXT, KIND_TOOL, get_node_spec, specs_with
from .prepare import GraphOutcome
from .storage import save_graph_locked

_NEW_AGENT_ID = "__new_subagent__"


_NEW_CONTEXT_ID = "__new_subagent_context__"


def _handle(handles, kind: str) -> str | None:
    return next((h.id for h in handles if h.kind == kind), None)


@transaction.atomic
def workflow_add_subagent(
    *, workflow: Workflow, lead_node_id: str, spec: dict, revision: int | None = None, position: dict | None = None
) -> GraphOutcome:
    """Add a teammate agent wired as the lead's tool, with a fresh Context of its own (the lead's is untouched).

    `spec` is the teammate's agent params. The outcome's extra holds `subagent_node_id` and `context_node_id`."""
    locked = workflow_for_update(workflow.pk)
    if revision is not None and revision != locked.revision:
        raise ConflictError(
            "revision_conflict",
            "The workflow changed since you loaded it; reload and try again.",
            extra={"current_revision": locked.revision},
        )
    graph = normalize_workflow_graph(locked.graph, workflow_id=locked.pk).graph
    lead = next((n for n in graph["nodes"] if n["id"] == lead_node_id), None)
    lead_spec = get_node_spec(lead.get("type")) if lead else None
    if lead is None or lead_spec is None or not lead_spec.has(IS_AGENT):
        raise ServiceError(
            "unknown_node", "The lead must be an agent node of this workflow.", extra={"node_id": lead_node_id}
        )
    context_spec = next((s for s in specs_with(IS_CONTEXT_PANEL) if _handle(s.outputs, KIND_CONTEXT)), None)
    if not isinstance(spec, dict):
        raise ServiceError("invalid_params", "The teammate's params must be an object.")
    if context_spec is None:
        raise ServiceError("no_context_type", "No Context node type is registered.", status=500)
    lead_position = lead.get("position") or {"x": 0, "y": 0}
    teammate_position = position or {"x": lead_position["x"] + 320, "y": lead_position["y"] + 200}
    graph["nodes"].append({"id": _NEW_AGENT_ID, "type": lead["type"], "params": spec, "position": teammate_position})
    graph["nodes"].append(
        {
            "id": _NEW_CONTEXT_ID,
            "type": context_spec.type,
            "params": {},
            "position": {"x": teammate_position["x"], "y": teammate_position["y"] + 160},
        }
    )
    graph["edges"].append(
        {
            "source": _NEW_AGENT_ID,
            "sourceHandle": _handle(lead_spec.outputs, KIND_TOOL),
            "target": lead_node_id,
            "targetHandle": _handle(lead_spec.inputs, KIND_TOOL),
        }
    )
    graph["edges"].append(
        {
            "source": _NEW_CONTEXT_ID,
            "sourceHandle": _handle(context_spec.outputs, KIND_CONTEXT),
            "target": _NEW_AGENT_ID,
            "targetHandle": _handle(lead_spec.inputs, KIND_CONTEXT),
        }
    )
    outcome = save_graph_locked(locked, graph=graph, name=None)
    outcome.extra["subagent_node_id"] = outcome.aliases.pop(_NEW_AGENT_ID)
    outcome.extra["context_node_id"] = outcome.aliases.pop(_NEW_CONTEXT_ID)
    return outcome
