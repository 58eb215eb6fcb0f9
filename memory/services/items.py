"""Remember, update and forget one item. Each runs in one transaction that also stores its receipt and history
row and registers the `memory.updated` broadcast and the embedding task for after the commit.

An update or forget locks the item row and compares `version` under the lock; a remember counts itself into the
namespace with a conditional increment of `item_count`, which both enforces the per-namespace limit and serialises
concurrent remembers with a clear."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import F

from core.errors import ServiceError

from .. import clock
from ..errors import item_not_found, version_conflict
from ..locks import memory_item_live_for_update
from ..models import MemoryEmbedding, MemoryItem, MemoryItemHistory, MemoryNamespace
from ..presenters import item_as_dict
from ..provenance import Provenance
from ..selectors import with_indexing_state
from ..validation import (
    clean_category,
    clean_content,
    clean_expires_at,
    clean_id,
    clean_patch,
    clean_tags,
    clean_title,
    clean_version,
)
from .announce import actor_label, announce_change
from .embeddings import enqueue_embedding, state_after_write
from .receipts import mutate_once


def _snapshot(item: MemoryItem) -> dict:
    return {
        "title": item.title,
        "content": item.content,
        "category": item.category,
        "tags": list(item.tags),
        "expires_at": item.expires_at.isoformat() if item.expires_at else None,
        "version": item.version,
    }


_ITEM = MemoryItem._meta.db_table


_NAMESPACE = MemoryNamespace._meta.db_table


def _insert_admitted_item(namespace: MemoryNamespace, fields: dict, now) -> MemoryItem | None:
    """Count the item into its namespace (refused at the limit) and insert it, in one statement: a remember is
    a handful of round trips, and this is the write path an agent's tool loop waits on. None when full."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH admitted AS (UPDATE {_NAMESPACE} SET item_count = item_count + 1 "
            "WHERE id = %s AND item_count < %s RETURNING id) "
            f"INSERT INTO {_ITEM} (namespace_id, content, title, category, tags, version, expires_at, created_at, "
            "updated_at) SELECT admitted.id, %s, %s, %s, %s::varchar[], 1, %s, %s, %s FROM admitted RETURNING id",
            [
                namespace.pk,
                settings.MEMORY_ITEMS_PER_NAMESPACE_MAX,
                fields["content"],
                fields["title"],
                fields["category"],
                fields["tags"],
                fields["expires_at"],
                now,
                now,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return MemoryItem(id=row[0], namespace=namespace, version=1, created_at=now, updated_at=now, **fields)


def memory_item_remember(
    *,
    namespace: MemoryNamespace,
    content: str,
    title: str | None = None,
    category: str | None = None,
    tags: list[str] | None = None,
    expires_at=None,
    actor,
    idempotency_key: str | None = None,
    announce_to_chat: bool = False,
    provenance: Provenance | None = None,
) -> dict:
    now = clock.now()
    fields = {
        "content": clean_content(content),
        "title": clean_title(title),
        "category": clean_category(category),
        "tags": clean_tags(tags),
        "expires_at": clean_expires_at(expires_at, now=now),
    }
    actor = actor_label(actor)
    origin = (provenance or Provenance.of_actor(actor)).history_fields()

    def apply() -> dict:
        item = _insert_admitted_item(namespace, fields, now)
        if item is None:
            raise ServiceError(
                "namespace_full",
                f"This memory holds the maximum of {settings.MEMORY_ITEMS_PER_NAMESPACE_MAX} items.",
                status=409,
                extra={"hint": "Forget or update memories you no longer need instead of adding new ones."},
            )
        MemoryItemHistory.objects.create(
            namespace=namespace,
            item=item,
            operation=MemoryItemHistory.Operation.REMEMBER,
            version=item.version,
            after=_snapshot(item),
            actor=actor,
            created_at=now,
            **origin,
        )
        enqueue_embedding(item)
        announce_change(
            namespace,
            item_id=item.pk,
            operation="remember",
            version=item.version,
            actor=actor,
            announce_to_chat=announce_to_chat,
        )
        return {"item": item_as_dict(item, state=state_after_write())}

    return mutate_once(
        namespace=namespace, idempotency_key=idempotency_key, operation="remember", request=fields, apply=apply
    )


def _locked_live_item_at_version(namespace: MemoryNamespace, item_id: int, expected_version: int, now) -> MemoryItem:
    # Lock the row before comparing versions: two writers holding the same expected_version queue here, and the
    # second sees the first's new version and gets a conflict instead of silently overwriting it.
    item = memory_item_live_for_update(namespace=namespace, item_id=item_id, now=now)
    if item is None:
        raise item_not_found()
    if item.version != expected_version:
        raise version_conflict(current_version=item.version, current=item_as_dict(item))
    return item


@dataclass(frozen=True)
class _Change:
    """What one change of a locked item did: the history row's own fields, the version it announces, the result."""

    history: dict
    version: int
    result: dict


def _change_item_at_version(
    *,
    namespace: MemoryNamespace,
    item_id,
    expected_version,
    operation: str,
    request: dict,
    actor,
    idempotency_key: str | None,
    announce_to_chat: bool,
    provenance: Provenance | None,
    change: Callable[[MemoryItem, object], _Change],
) -> dict:
    """The skeleton of an update and a forget (`item_id` and `expected_version` cleaned): lock the live item at
    `expected_version`, `change(item, now)` it, write its history row and announce it, once per idempotency key."""
    actor = actor_label(actor)
    origin = (provenance or Provenance.of_actor(actor)).history_fields()

    def apply() -> dict:
        now = clock.now()
        done = change(_locked_live_item_at_version(namespace, item_id, expected_version, now), now)
        MemoryItemHistory.objects.create(
            namespace=namespace,
            item_id=item_id,
            operation=operation,
            actor=actor,
            created_at=now,
            **done.history,
            **origin,
        )
        announce_change(
            namespace,
            item_id=item_id,
            operation=operation,
            version=done.version,
            actor=actor,
            announce_to_chat=announce_to_chat,
        )
        return done.result

    return mutate_once(
        namespace=namespace,
        idempotency_key=idempotency_key,
        operation=operation,
        request={"id": item_id, "expected_version": expected_version, **request},
        apply=apply,
    )


def memory_item_update(
    *,
    namespace: MemoryNamespace,
    item_id,
    expected_version,
    patch: dict,
    actor,
    idempotency_key: str | None = None,
    announce_to_chat: bool = False,
    provenance: Provenance | None = None,
) -> dict:
    item_id = clean_id(item_id)
    expected_version = clean_version(expected_version)
    changes = clean_patch(patch)

    def update(item: MemoryItem, now) -> _Change:
        before = _snapshot(item)
        for field, value in changes.items():
            setattr(item, field, value)
        item.version += 1
        item.updated_at = now
        item.save(update_fields=[*changes.keys(), "version", "updated_at"])
        history = {"version": item.version, "before": before, "after": _snapshot(item)}
        if {"content", "title"} & changes.keys():
            enqueue_embedding(item)
            state = state_after_write()
        else:
            # The vector covers title and content only, so it stays valid: move it to the new version.
            MemoryEmbedding.objects.filter(item=item, item_version=expected_version).update(item_version=item.version)
            item, state = with_indexing_state(MemoryItem.objects.filter(pk=item.pk)).get(), None
        return _Change(history=history, version=item.version, result={"item": item_as_dict(item, state=state)})

    return _change_item_at_version(
        namespace=namespace,
        item_id=item_id,
        expected_version=expected_version,
        operation="update",
        request={"patch": changes},
        actor=actor,
        idempotency_key=idempotency_key,
        announce_to_chat=announce_to_chat,
        provenance=provenance,
        change=update,
    )


def delete_items(namespace: MemoryNamespace, item_ids: list[int]) -> int:
    """Delete items with their projections and their history content (forgotten content must not linger)."""
    if not item_ids:
        return 0
    MemoryItemHistory.objects.filter(namespace=namespace, item_id__in=item_ids).delete()
    deleted = MemoryItem.objects.filter(namespace=namespace, pk__in=item_ids).delete()[1].get("memory.MemoryItem", 0)
    if deleted:
        MemoryNamespace.objects.filter(pk=namespace.pk).update(item_count=F("item_count") - deleted)
    return deleted


def memory_item_forget(
    *,
    namespace: MemoryNamespace,
    item_id,
    expected_version,
    actor,
    idempotency_key: str | None = None,
    announce_to_chat: bool = False,
    provenance: Provenance | None = None,
) -> dict:
    item_id = clean_id(item_id)
    expected_version = clean_version(expected_version)

    def forget(item: MemoryItem, now) -> _Change:
        delete_items(namespace, [item.pk])
        return _Change(
            history={"version": expected_version},
            version=expected_version,
            result={"forgotten": {"id": item_id, "version": expected_version}},
        )

    return _change_item_at_version(
        namespace=namespace,
        item_id=item_id,
        expected_version=expected_version,
        operation="forget",
        request={},
        actor=actor,
        idempotency_key=idempotency_key,
        announce_to_chat=announce_to_chat,
        provenance=provenance,
        change=forget,
    )
