"""A memory's namespace, one per (owner, workflow, memory node): found or made, and cleared whole."""

from __future__ import annotations

from django.db import transaction

from core.errors import NotFoundError

from .. import clock
from ..errors import invalid
from ..locks import memory_namespace_for_update
from ..models import MemoryItem, MemoryItemHistory, MemoryNamespace
from ..provenance import Provenance
from .announce import actor_label, announce_change


def memory_namespace_get_or_create(*, owner, workflow, node_id: str) -> MemoryNamespace:
    if owner is None or getattr(owner, "pk", None) != workflow.owner_id:
        # The namespace's owner is the workflow's owner; anything else is someone else's memory.
        raise NotFoundError("not_found", "Workflow not found.")
    if not isinstance(node_id, str) or not node_id or len(node_id) > 200:
        raise invalid("node_id is not a valid node id.", "Use the memory node's canonical id.")
    namespace, _ = MemoryNamespace.objects.get_or_create(owner_id=owner.pk, workflow_id=workflow.pk, node_id=node_id)
    return namespace


def memory_namespace_items_clear(*, namespace: MemoryNamespace, actor, announce_to_chat: bool = False) -> int:
    """Clear Memory: remove every item of the namespace (items only; the namespace and its receipts stay)."""
    actor = actor_label(actor)
    with transaction.atomic():
        # Taking the namespace row first orders this against concurrent remembers (they increment item_count).
        memory_namespace_for_update(namespace.pk)
        item_ids = list(MemoryItem.objects.filter(namespace=namespace).values_list("pk", flat=True))
        MemoryItemHistory.objects.filter(namespace=namespace).delete()
        MemoryItem.objects.filter(namespace=namespace).delete()
        MemoryNamespace.objects.filter(pk=namespace.pk).update(item_count=0)
        MemoryItemHistory.objects.create(
            namespace=namespace,
            operation=MemoryItemHistory.Operation.CLEAR,
            after={"removed": len(item_ids)},
            actor=actor,
            source=Provenance.of_actor(actor).source,
            created_at=clock.now(),
        )
        announce_change(
            namespace, item_id=None, operation="clear", version=None, actor=actor, announce_to_chat=announce_to_chat
        )
    return len(item_ids)


def memory_namespace_clear(*, workflow, node_id: str, actor) -> int:
    """The simpleMemory node's clear/reset hook: remove all items of (workflow owner, workflow, node). -> count."""
    namespace = MemoryNamespace.objects.filter(
        owner_id=workflow.owner_id, workflow_id=workflow.pk, node_id=node_id
    ).first()
    if namespace is None:
        return 0
    return memory_namespace_items_clear(namespace=namespace, actor=actor)
