"""Row locks of memory. Every `select_for_update` of a memory row goes through here.

Place in the lock order (docs/architecture.md#lock-order): memory rows are tool rows (**6**): the `memory` tool
runs under its firing's lock, after the firing and any chat row, before conversation headers. Within memory, the
namespace row comes before its items; the expiry purge takes items without waiting (`SKIP LOCKED`), so it never
queues behind a writer in the other order.
"""

from __future__ import annotations

from django.db.models import Q

from .models import MemoryItem, MemoryNamespace


def memory_namespace_for_update(namespace_id) -> MemoryNamespace | None:
    """The namespace row, locked `FOR UPDATE`: a Clear holds new items out (their insert waits on the foreign key)
    until it commits, and orders itself against remembers, which bump `item_count`."""
    return MemoryNamespace.objects.select_for_update().filter(pk=namespace_id).first()


def memory_item_live_for_update(*, namespace, item_id: int, now) -> MemoryItem | None:
    """A live (unexpired) item, locked before its version is compared: two writers holding the same
    `expected_version` queue here, and the second sees the first's version and gets a conflict instead of silently
    overwriting it. `FOR UPDATE`: a forget deletes the row under this lock."""
    rows = MemoryItem.objects.select_for_update(of=("self",))
    return rows.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), namespace=namespace, pk=item_id).first()


def memory_items_expired_for_update(*, now, limit: int) -> list[tuple[int, int]]:
    """(namespace_id, item_id) of up to `limit` expired items, locked for deletion; rows another transaction
    holds are skipped (`SKIP LOCKED`): the next purge takes them."""
    rows = MemoryItem.objects.select_for_update(skip_locked=True).filter(expires_at__lte=now)
    return list(rows.values_list("namespace_id", "pk")[:limit])


def memory_item_at_version_for_update(*, item_id: int, version: int) -> int | None:
    """The namespace id of the item if it is still at `version`, locking it `FOR NO KEY UPDATE` (`no_key=True`):
    the projection written under it only references the item, and an edit (which locks `FOR UPDATE`) still
    waits for it, so a vector is never stored for a version that is gone."""
    rows = MemoryItem.objects.select_for_update(no_key=True).filter(pk=item_id, version=version)
    return rows.values_list("namespace_id", flat=True).first()
