"""Who may touch which memory: the workflow's owner, for a memory node of that workflow. Others get 404."""

from __future__ import annotations

from django.http import Http404

from core.errors import NotFoundError
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


def access_memory_namespace(*, user, workflow_id, node_id: str, create: bool = True):
    """(workflow, namespace) for the owner's memory node; a node removed from the graph stays reachable while its
    namespace exists, so its items can still be read and cleared.

    Reads pass `create=False`: a GET never writes, so a node nothing was stored in yet gives (workflow, None)
    instead of a new namespace row."""
    workflow = access_workflow(user=user, workflow_id=workflow_id)
    namespace = MemoryNamespace.objects.filter(owner_id=user.pk, workflow_id=workflow.pk, node_id=node_id).first()
    if namespace is None and not _graph_has_memory_node(workflow, node_id):
        raise NotFoundError("not_found", "Memory node not found.")
    if namespace is not None or not create:
        return workflow, namespace
    return workflow, memory_namespace_get_or_create(owner=user, workflow=workflow, node_id=node_id)


def memory_namespace_or_404(request, workflow_id, node_id: str, *, create: bool = True):
    """`access_memory_namespace` for the pages: anything but the owner's memory node is a 404 page."""
    try:
        return access_memory_namespace(user=request.user, workflow_id=workflow_id, node_id=node_id, create=create)
    except NotFoundError:
        raise Http404("Memory node not found") from None
