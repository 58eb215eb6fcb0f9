"""Compute projections outside any transaction, then store each one only if its item has not changed since."""

from __future__ import annotations

import logging

from . import clock
from .billing import embedding_call_record, item_batch_key
from .embedders import Embedder, EmbedderError, embedding_text, get_embedder
from .embedders.indexes import ensure_vector_index
from .models import MemoryEmbedding, MemoryItem
from .outliers import memory_embeddings_outliers_mark
from .services import memory_embedding_store

logger = logging.getLogger(__name__)


def embed_items(item_ids: list[int], *, embedder: Embedder | None = None, attempt: str = "") -> list[str]:
    """Embed the given items with the configured embedder. Returns a state per id: ready/failed/skipped.

    An item whose current version already has a ready vector for this model is skipped, so a retried task makes no
    second provider call; `attempt` (a deliberate re-embedding, `memory_reindex --all`) embeds it again. Each
    provider call is billed once to the owner and workflow of the items it embedded (memory/billing.py), so the
    items are embedded one namespace at a time.
    """
    embedder = embedder or get_embedder()
    if not embedder.enabled:
        return ["skipped"] * len(item_ids)
    now = clock.now()
    items = {
        item.pk: item
        for item in MemoryItem.objects.filter(pk__in=item_ids)
        .select_related("namespace")
        .only(
            "pk",
            "title",
            "content",
            "version",
            "expires_at",
            "namespace__owner_id",
            "namespace__workflow_id",
            "namespace__node_id",
        )
    }
    live = [items[i] for i in item_ids if i in items and not (items[i].expires_at and items[i].expires_at <= now)]
    outcome = {i: "skipped" for i in item_ids}
    if live and not attempt:
        done = set(
            MemoryEmbedding.objects.filter(
                item_id__in=[item.pk for item in live], model=embedder.model, status=MemoryEmbedding.Status.READY
            )
            .filter(item_version__in={item.version for item in live})
            .values_list("item_id", "item_version")
        )
        live = [item for item in live if (item.pk, item.version) not in done]
    groups: dict[int, list[MemoryItem]] = {}
    for item in live:
        groups.setdefault(item.namespace_id, []).append(item)
    for group in groups.values():
        for item, state in zip(group, _embed_group(group, embedder=embedder, attempt=attempt), strict=True):
            outcome[item.pk] = state
    return [outcome[i] for i in item_ids]


def _embed_group(live: list[MemoryItem], *, embedder: Embedder, attempt: str) -> list[str]:
    """One embedding call for items of one namespace, billed, then each vector stored if its item is unchanged."""
    namespace = live[0].namespace
    vectors, error = None, ""
    try:
        vectors, input_tokens = embedder.embed_measured(
            [embedding_text(title=item.title, content=item.content) for item in live]
        )
        # The call happened, so it is billed even if its answer turns out unusable.
        embedding_call_record(
            embedder=embedder,
            input_tokens=input_tokens,
            idempotency_key=item_batch_key(model=embedder.model, items=live, attempt=attempt),
            owner_id=namespace.owner_id,
            workflow_id=namespace.workflow_id,
            memory_node_id=namespace.node_id,
            purpose="index",
            texts=len(live),
        )
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
    states = []
    for position, item in enumerate(live):
        stored = memory_embedding_store(
            item_id=item.pk,
            item_version=item.version,
            model=embedder.model,
            dims=embedder.dims,
            vector=None if vectors is None else vectors[position],
            error=error,
        )
        states.append(("ready" if vectors is not None else "failed") if stored else "skipped")
    stored_ids = [item.pk for item, state in zip(live, states, strict=True) if state == "ready"]
    if stored_ids:
        try:
            memory_embeddings_outliers_mark(item_ids=stored_ids, model=embedder.model, dims=embedder.dims)
        except Exception:  # unmarked, the vector is still in the main index; only its second chance is lost
            logger.exception("could not mark outlier vectors for %s", embedder.model)
    return states
