"""Who changed memory, and who hears of it: the name history keeps, the `memory.updated` broadcast and the
memory-edit listeners (the chat), all on commit."""

from __future__ import annotations

from ..events import publish_memory_updated
from ..listeners import MemoryEdit, announce_memory_edit_on_commit


def actor_label(actor) -> str:
    """History names who changed an item: the agent node, the owner in the panel, staff in admin."""
    if isinstance(actor, str) and actor:
        return actor[:200]
    if getattr(actor, "pk", None) is not None:
        return f"{'staff' if getattr(actor, 'is_staff', False) else 'owner'}:{actor.pk}"
    return "system"


def announce_change(namespace, *, item_id, operation: str, version, actor: str, announce_to_chat: bool) -> None:
    publish_memory_updated(namespace=namespace, item_id=item_id, operation=operation, version=version)
    if announce_to_chat:
        announce_memory_edit_on_commit(
            MemoryEdit(
                workflow_id=namespace.workflow_id,
                memory_node_id=namespace.node_id,
                item_id=item_id,
                operation=operation,
                version=version,
                actor=actor,
            )
        )
