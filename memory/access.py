"""Who may touch which memory: the workflow's owner, for a memory node of that workflow. Others get 404."""

from __future__ import annotations

from opencompany.errors import NotFoundError
from workflows.selectors import access_workflow

from .models import MemoryNamespace
from .services import memory_namespace_get_or_create

MEMORY_NODE_TYPE = "simpleMemory"


def _graph_has_memory_node(workflow, node_id: str) -> bool:
    nodes = (workflow.graph or {}).get("nodes") if isinstance(workflow.graph, dict) else None
    return any(
        isinstance(node, dict) and node.get("id") == node_id and node.get("type") == MEMORY_NODE_TYPE
        for node in nodes or []
    )


def access_memory_namespace(*, user, workflow_id, node_id: str):
    """(workflow, namespace) for the owner's memory node; a node removed from the graph stays reachable while its
    namespace exists, so its items can still be read and cleared."""
    workflow = access_workflow(user=user, workflow_id=workflow_id)
    exists = MemoryNamespace.objects.filter(owner_id=user.pk, workflow_id=workflow.pk, node_id=node_id).exists()
    if not exists and not _graph_has_memory_node(workflow, node_id):
        raise NotFoundError("not_found", "Memory node not found.")
    return workflow, memory_namespace_get_or_create(owner=user, workflow=workflow, node_id=node_id)
