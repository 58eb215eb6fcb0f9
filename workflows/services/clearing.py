"""Clear Context and Clear Memory (admin, panels). They name no other app: conversations are archived through
the archive outbox and its listeners, memory through each memory-holding node's `clear_memory` hook."""

from __future__ import annotations

from django.db import transaction

from core.errors import ServiceError

from ..graph import agent_for_context, agent_nodes, normalize_workflow_graph
from ..locks import workflow_for_update
from ..models import ArchiveOutbox, Workflow
from ..nodes import get_node_spec
from ..outbox import archive_outbox_write
from .prepare import context_node_ids


@transaction.atomic
def workflow_context_clear(*, workflow: Workflow, agent_node_id: str | None = None) -> ArchiveOutbox:
    """Clear stored conversations through the archive listeners (all agents, or one). Memory is untouched.

    Returns the outbox row; it is drained on commit, or call `workflows.outbox.archive_outbox_process` to run it
    now (the admin does, so the page shows the result)."""
    locked = workflow_for_update(workflow.pk)
    graph = normalize_workflow_graph(locked.graph, workflow_id=locked.pk).graph
    agents = [agent_node_id] if agent_node_id else [node["id"] for node in agent_nodes(graph)]
    contexts = [
        c for c in context_node_ids(graph) if agent_node_id is None or agent_for_context(graph, c) == agent_node_id
    ]
    return archive_outbox_write(
        workflow_id=locked.pk,
        reason=ArchiveOutbox.Reason.CONTEXT_CLEARED,
        context_node_ids=contexts,
        agent_node_ids=agents,
    )


@transaction.atomic
def workflow_memory_clear(*, workflow: Workflow, actor=None, node_id: str | None = None) -> dict[str, int]:
    """Clear Memory: removes items only, through each memory-holding node's `clear_memory` hook."""
    locked = workflow_for_update(workflow.pk)
    graph = normalize_workflow_graph(locked.graph, workflow_id=locked.pk).graph
    cleared = {}
    for node in graph["nodes"]:
        if node_id is not None and node["id"] != node_id:
            continue
        spec = get_node_spec(node.get("type"))
        if spec is not None and spec.clear_memory is not None:
            cleared[node["id"]] = spec.clear_memory(locked, node, actor=actor)
    if node_id is not None and not cleared:
        raise ServiceError("unknown_node", "That node holds no memory.", extra={"node_id": node_id})
    return cleared
