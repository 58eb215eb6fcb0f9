"""The JSON shape of an item, shared by the tool, REST, receipts and the panel (content included: these are the
authorized readers; events and logs never use it)."""

from __future__ import annotations

from .embedders import get_embedder
from .models import MemoryEmbedding, MemoryItem

FTS_ONLY = "fts_only"  # no embedder configured: full-text search only
NOT_INDEXED = "not_indexed"  # embedder configured, no projection yet (run memory_reindex)


def indexing_state(*, embedder_enabled: bool, status: str | None, embedded_version: int | None, version: int) -> str:
    if not embedder_enabled:
        return FTS_ONLY
    if status is None:
        return NOT_INDEXED
    if status == MemoryEmbedding.Status.READY and embedded_version != version:
        return MemoryEmbedding.Status.PENDING.value
    return status


def item_as_dict(item: MemoryItem, *, state: str | None = None) -> dict:
    if state is None:
        state = getattr(item, "indexing_state_value", None)
    if state is None:
        embedder = get_embedder()
        state = indexing_state(
            embedder_enabled=embedder.enabled,
            status=getattr(item, "embedding_status", None),
            embedded_version=getattr(item, "embedding_version", None),
            version=item.version,
        )
    return {
        "id": item.pk,
        "title": item.title,
        "content": item.content,
        "category": item.category,
        "tags": list(item.tags),
        "version": item.version,
        "expires_at": item.expires_at.isoformat() if item.expires_at else None,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
        "indexing_state": state,
    }
