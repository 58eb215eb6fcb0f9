"""Compute projections outside any transaction, then store each one only if its item has not changed since."""

from __future__ import annotations

import logging

from . import clock
from .embedders import Embedder, EmbedderError, embedding_text, get_embedder
from .embedders.indexes import ensure_vector_index
from .models import MemoryItem
from .services import memory_embedding_store

logger = logging.getLogger(__name__)


def embed_items(item_ids: list[int], *, embedder: Embedder | None = None) -> list[str]:
    """Embed the given items with the configured embedder. Returns a state per id: ready/failed/skipped."""
    embedder = embedder or get_embedder()
    if not embedder.enabled:
        return ["skipped"] * len(item_ids)
    now = clock.now()
    items = {
        item.pk: item
        for item in MemoryItem.objects.filter(pk__in=item_ids).only("pk", "title", "content", "version", "expires_at")
    }
    live = [items[i] for i in item_ids if i in items and not (items[i].expires_at and items[i].expires_at <= now)]
    outcome = {i: "skipped" for i in item_ids}
    if not live:
        return [outcome[i] for i in item_ids]
    vectors, error = None, ""
    try:
        vectors = embedder.embed([embedding_text(title=item.title, content=item.content) for item in live])
        if len(vectors) != len(live):
            raise EmbedderError("embedder returned the wrong number of vectors")
    except Exception as exc:  # any failure leaves the item searchable by text; reindex retries later
        vectors, error = None, (str(exc) if isinstance(exc, EmbedderError) else type(exc).__name__)
        logger.warning("memory embedding failed: %s", error)
    if vectors is not None:
        try:
            ensure_vector_index(embedder.model, embedder.dims)
        except Exception:
            logger.exception("could not create the vector index for %s", embedder.model)
    for position, item in enumerate(live):
        stored = memory_embedding_store(
            item_id=item.pk,
            item_version=item.version,
            model=embedder.model,
            dims=embedder.dims,
            vector=None if vectors is None else vectors[position],
            error=error,
        )
        outcome[item.pk] = ("ready" if vectors is not None else "failed") if stored else "skipped"
    return [outcome[i] for i in item_ids]
