"""An item's vector projection: marked pending in the write's transaction, embedded by a task after the commit,
stored only while the item is still at the version that was embedded."""

from __future__ import annotations

import logging

from django.db import transaction

from core.queueing import enqueue_task

from ..embedders import get_embedder
from ..locks import memory_item_at_version_for_update
from ..models import MemoryEmbedding, MemoryItem
from ..presenters import FTS_ONLY

logger = logging.getLogger(__name__)


def enqueue_embedding(item: MemoryItem) -> None:
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


def state_after_write() -> str:
    return "pending" if get_embedder().enabled else FTS_ONLY


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
