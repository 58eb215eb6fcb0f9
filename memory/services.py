"""Writes to memory. Every mutation runs in one transaction that also stores its receipt and history row and
registers the `memory.updated` broadcast and the embedding task for after the commit.

Concurrency policy: an update or forget locks the item row (`select_for_update`) and compares `version` under the
lock; a remember takes the namespace row with a conditional increment of `item_count`, which both enforces the
per-namespace limit and serialises concurrent remembers with a clear. Retries carry an idempotency key: the receipt
table's unique (namespace, key) makes the second of two concurrent retries roll back and return the first result.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F

from opencompany.errors import NotFoundError, ServiceError
from opencompany.queueing import enqueue_task

from . import clock
from .embedders import get_embedder
from .errors import invalid, item_not_found, version_conflict
from .events import publish_memory_updated
from .listeners import MemoryEdit, announce_memory_edit_on_commit
from .locks import (
    memory_item_at_version_for_update,
    memory_item_live_for_update,
    memory_items_expired_for_update,
    memory_namespace_for_update,
)
from .models import MemoryEmbedding, MemoryItem, MemoryItemHistory, MemoryNamespace, MemoryReceipt
from .presenters import FTS_ONLY, item_as_dict
from .provenance import Provenance
from .validation import (
    clean_category,
    clean_content,
    clean_expires_at,
    clean_id,
    clean_patch,
    clean_tags,
    clean_title,
    clean_version,
)

logger = logging.getLogger(__name__)


def actor_label(actor) -> str:
    """History names who changed an item: the agent node, the owner in the panel, staff in admin."""
    if isinstance(actor, str) and actor:
        return actor[:200]
    if getattr(actor, "pk", None) is not None:
        return f"{'staff' if getattr(actor, 'is_staff', False) else 'owner'}:{actor.pk}"
    return "system"


def memory_namespace_get_or_create(*, owner, workflow, node_id: str) -> MemoryNamespace:
    if owner is None or getattr(owner, "pk", None) != workflow.owner_id:
        # The namespace's owner is the workflow's owner; anything else is someone else's memory.
        raise NotFoundError("not_found", "Workflow not found.")
    if not isinstance(node_id, str) or not node_id or len(node_id) > 200:
        raise invalid("node_id is not a valid node id.", "Use the memory node's canonical id.")
    namespace, _ = MemoryNamespace.objects.get_or_create(owner_id=owner.pk, workflow_id=workflow.pk, node_id=node_id)
    return namespace


def _snapshot(item: MemoryItem) -> dict:
    return {
        "title": item.title,
        "content": item.content,
        "category": item.category,
        "tags": list(item.tags),
        "expires_at": item.expires_at.isoformat() if item.expires_at else None,
        "version": item.version,
    }


def _digest(operation: str, request: dict) -> str:
    return hashlib.sha256(json.dumps([operation, request], sort_keys=True, default=str).encode()).hexdigest()


def _replay(receipt: MemoryReceipt, digest: str) -> dict:
    if receipt.request_digest != digest:
        raise invalid(
            "This idempotency key was already used for a different change.",
            "Use a new key for a new change.",
            code="idempotency_key_reused",
        )
    return receipt.result


def _receipt(namespace: MemoryNamespace, key: str) -> MemoryReceipt | None:
    return MemoryReceipt.objects.filter(namespace=namespace, key=key).first()


def _mutate(
    *, namespace: MemoryNamespace, idempotency_key: str | None, operation: str, request: dict, apply: Callable
) -> dict:
    """Run `apply()` (-> result dict) once per idempotency key; a replay returns the stored result and sends nothing.

    The receipt is not looked up first: a retry is rare, and the unique (namespace, key) of the receipt insert
    catches it. Its second `apply()` rolls back whole (events and tasks are on-commit, so nothing leaves), and the
    first call's receipt is the answer, also when the retry's `apply()` failed because the first one already
    happened (the item is gone, the version moved on, the namespace filled up).
    """
    key = (idempotency_key or "")[:255] or None
    digest = _digest(operation, request)
    try:
        with transaction.atomic():
            result = apply()
            if key:
                MemoryReceipt.objects.create(
                    namespace=namespace,
                    key=key,
                    operation=operation,
                    request_digest=digest,
                    result=result,
                    created_at=clock.now(),
                )
    except (IntegrityError, ServiceError):
        if key and (receipt := _receipt(namespace, key)):
            return _replay(receipt, digest)
        raise
    return result


def _enqueue_embedding(item: MemoryItem) -> None:
    """Mark the item's projection pending in this transaction and embed it after the commit, never inside it."""
    embedder = get_embedder()
    if not embedder.enabled:
        return
    MemoryEmbedding.objects.update_or_create(
        item=item,
        model=embedder.model,
        defaults={"status": MemoryEmbedding.Status.PENDING, "item_version": item.version, "error": ""},
        create_defaults={
            "namespace_id": item.namespace_id,
            "status": MemoryEmbedding.Status.PENDING,
            "item_version": item.version,
            "error": "",
        },
    )
    item_id = item.pk

    def send():
        try:
            enqueue_task("memory.embed_item", args=(item_id,))
        except Exception:  # the broker being down must not fail a committed write; memory_reindex catches up
            logger.warning("could not enqueue memory.embed_item", extra={"item_id": item_id})

    transaction.on_commit(send)


def _state_after_write() -> str:
    return "pending" if get_embedder().enabled else FTS_ONLY


def _announce(namespace, *, item_id, operation: str, version, actor: str, announce_to_chat: bool) -> None:
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
        _enqueue_embedding(item)
        _announce(
            namespace,
            item_id=item.pk,
            operation="remember",
            version=item.version,
            actor=actor,
            announce_to_chat=announce_to_chat,
        )
        return {"item": item_as_dict(item, state=_state_after_write())}

    return _mutate(
        namespace=namespace, idempotency_key=idempotency_key, operation="remember", request=fields, apply=apply
    )


def _locked_live_item(namespace: MemoryNamespace, item_id: int, now) -> MemoryItem:
    # Lock the row before comparing versions: two writers holding the same expected_version queue here, and the
    # second sees the first's new version and gets a conflict instead of silently overwriting it.
    item = memory_item_live_for_update(namespace=namespace, item_id=item_id, now=now)
    if item is None:
        raise item_not_found()
    return item


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
    actor = actor_label(actor)
    origin = (provenance or Provenance.of_actor(actor)).history_fields()

    def apply() -> dict:
        now = clock.now()
        item = _locked_live_item(namespace, item_id, now)
        if item.version != expected_version:
            raise version_conflict(current_version=item.version, current=item_as_dict(item))
        before = _snapshot(item)
        for field, value in changes.items():
            setattr(item, field, value)
        item.version += 1
        item.updated_at = now
        item.save(update_fields=[*changes.keys(), "version", "updated_at"])
        MemoryItemHistory.objects.create(
            namespace=namespace,
            item=item,
            operation=MemoryItemHistory.Operation.UPDATE,
            version=item.version,
            before=before,
            after=_snapshot(item),
            actor=actor,
            created_at=now,
            **origin,
        )
        if {"content", "title"} & changes.keys():
            _enqueue_embedding(item)
            state = _state_after_write()
        else:
            # The vector covers title and content only, so it stays valid: move it to the new version.
            MemoryEmbedding.objects.filter(item=item, item_version=expected_version).update(item_version=item.version)
            state = None
        _announce(
            namespace,
            item_id=item.pk,
            operation="update",
            version=item.version,
            actor=actor,
            announce_to_chat=announce_to_chat,
        )
        if state is None:
            from .selectors import with_indexing_state

            item = with_indexing_state(MemoryItem.objects.filter(pk=item.pk)).get()
        return {"item": item_as_dict(item, state=state)}

    return _mutate(
        namespace=namespace,
        idempotency_key=idempotency_key,
        operation="update",
        request={"id": item_id, "expected_version": expected_version, "patch": changes},
        apply=apply,
    )


def _delete_items(namespace: MemoryNamespace, item_ids: list[int]) -> int:
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
    actor = actor_label(actor)
    origin = (provenance or Provenance.of_actor(actor)).history_fields()

    def apply() -> dict:
        now = clock.now()
        item = _locked_live_item(namespace, item_id, now)
        if item.version != expected_version:
            raise version_conflict(current_version=item.version, current=item_as_dict(item))
        _delete_items(namespace, [item.pk])
        MemoryItemHistory.objects.create(
            namespace=namespace,
            item_id=item_id,
            operation=MemoryItemHistory.Operation.FORGET,
            version=expected_version,
            actor=actor,
            created_at=now,
            **origin,
        )
        _announce(
            namespace,
            item_id=item_id,
            operation="forget",
            version=expected_version,
            actor=actor,
            announce_to_chat=announce_to_chat,
        )
        return {"forgotten": {"id": item_id, "version": expected_version}}

    return _mutate(
        namespace=namespace,
        idempotency_key=idempotency_key,
        operation="forget",
        request={"id": item_id, "expected_version": expected_version},
        apply=apply,
    )


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
        _announce(
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


def memory_items_purge_expired(*, batch_size: int = 1000) -> int:
    """Delete expired items (they are already invisible to every read) and old receipts. -> items removed."""
    now = clock.now()
    removed = 0
    while True:
        with transaction.atomic():
            rows = memory_items_expired_for_update(now=now, limit=batch_size)
            if not rows:
                break
            by_namespace: dict[int, list[int]] = {}
            for namespace_id, item_id in rows:
                by_namespace.setdefault(namespace_id, []).append(item_id)
            for namespace in MemoryNamespace.objects.filter(pk__in=by_namespace):
                removed += _delete_items(namespace, by_namespace[namespace.pk])
        if len(rows) < batch_size:
            break
    MemoryReceipt.objects.filter(created_at__lt=now - timedelta(hours=settings.MEMORY_RECEIPT_TTL_HOURS)).delete()
    return removed


def memory_embedding_store(*, item_id: int, item_version: int, model: str, dims: int, vector, error: str = "") -> bool:
    """Write one projection if the item is still at `item_version` (a later edit re-embeds). -> stored?"""
    with transaction.atomic():
        namespace_id = memory_item_at_version_for_update(item_id=item_id, version=item_version)
        if namespace_id is None:
            return False
        if vector is None:
            defaults = {
                "status": MemoryEmbedding.Status.FAILED,
                "error": error[:500],
                "item_version": item_version,
                "dims": dims or None,
                "embedding": None,
            }
        else:
            defaults = {
                "status": MemoryEmbedding.Status.READY,
                "error": "",
                "item_version": item_version,
                "dims": dims,
                "embedding": vector,
            }
        MemoryEmbedding.objects.update_or_create(
            item_id=item_id, model=model, defaults=defaults, create_defaults={**defaults, "namespace_id": namespace_id}
        )
    return True
