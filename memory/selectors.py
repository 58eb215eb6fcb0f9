"""Reads. Expired items are filtered in SQL here, so they are invisible everywhere before any purge runs."""

from __future__ import annotations

import logging
from contextlib import nullcontext

from django.conf import settings
from django.db import connection, transaction
from django.db.models import IntegerField, OuterRef, Q, QuerySet, Subquery

from . import clock
from .cursors import decode_cursor, encode_cursor, listing_digest
from .embedders import EmbedderError, get_embedder
from .embedders.indexes import vector_cast
from .errors import item_not_found
from .models import FTS_CONFIG, MemoryEmbedding, MemoryItem, MemoryNamespace
from .presenters import item_as_dict
from .query_vectors import prefetched_query_vector, query_embedding_text
from .validation import clean_filter_list, clean_id, clean_limit, clean_query

logger = logging.getLogger(__name__)


def live_items(namespace: MemoryNamespace, *, now=None) -> QuerySet[MemoryItem]:
    now = now or clock.now()
    return MemoryItem.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), namespace=namespace)


def with_indexing_state(queryset: QuerySet[MemoryItem]) -> QuerySet[MemoryItem]:
    embedder = get_embedder()
    if not embedder.enabled:
        return queryset
    projection = MemoryEmbedding.objects.filter(item=OuterRef("pk"), model=embedder.model)
    return queryset.annotate(
        embedding_status=Subquery(projection.values("status")[:1]),
        embedding_version=Subquery(projection.values("item_version")[:1], output_field=IntegerField()),
    )


def memory_namespace_find(*, owner, workflow, node_id: str) -> MemoryNamespace | None:
    return MemoryNamespace.objects.filter(owner_id=owner.pk, workflow_id=workflow.pk, node_id=node_id).first()


def memory_item_get(*, namespace: MemoryNamespace, item_id) -> dict:
    item_id = clean_id(item_id)
    item = with_indexing_state(live_items(namespace).filter(pk=item_id)).first()
    if item is None:
        raise item_not_found()
    return {"item": item_as_dict(item)}


def _filter_sql(categories: list[str], tags: list[str], params: list) -> str:
    sql = ""
    if categories:
        sql += " AND i.category = ANY(%s)"
        params.append(categories)
    if tags:
        sql += " AND i.tags && %s::varchar[]"
        params.append(tags)
    return sql


def memory_items_list(*, namespace: MemoryNamespace, categories=None, tags=None, limit=None, cursor=None) -> dict:
    """Newest first, keyset on id: a page never repeats or skips an item while others are added."""
    categories = clean_filter_list(categories, name="categories")
    tags = clean_filter_list(tags, name="tags")
    limit = clean_limit(limit)
    digest = listing_digest(kind="list", ns=namespace.pk, categories=categories, tags=tags)
    position = decode_cursor(cursor, digest=digest)
    queryset = live_items(namespace)
    if categories:
        queryset = queryset.filter(category__in=categories)
    if tags:
        queryset = queryset.filter(tags__overlap=tags)
    if position:
        queryset = queryset.filter(pk__lt=position["last_id"])
    rows = list(with_indexing_state(queryset.order_by("-pk"))[: limit + 1])
    page, more = rows[:limit], len(rows) > limit
    return {
        "items": [item_as_dict(item) for item in page],
        "next_cursor": encode_cursor(kind="list", digest=digest, last_id=page[-1].pk) if more else None,
    }


def _namespace_has_vectors(namespace: MemoryNamespace, model: str) -> bool:
    return MemoryEmbedding.objects.filter(
        namespace_id=namespace.pk, model=model, status=MemoryEmbedding.Status.READY
    ).exists()


_FTS_SQL = """
SELECT i.id, ts_rank(i.search_vector, q.tsq)::float8 AS score, 1 AS fts_rank, NULL::bigint AS vector_rank
FROM memory_memoryitem i, (SELECT websearch_to_tsquery(%s::regconfig, %s) AS tsq) q
WHERE i.namespace_id = %s AND i.search_vector @@ q.tsq AND (i.expires_at IS NULL OR i.expires_at > %s){filters}{after}
ORDER BY score DESC, i.id DESC
LIMIT %s
"""

# Reciprocal rank fusion of the full-text ranking (authoritative: every text match is ranked) and the nearest
# vectors (an accelerator: the top candidates within a distance). Filters apply inside both lists, in SQL.
_HYBRID_SQL = """
WITH q AS (SELECT websearch_to_tsquery(%s::regconfig, %s) AS tsq),
fts AS (
    SELECT i.id, row_number() OVER (ORDER BY ts_rank(i.search_vector, q.tsq) DESC, i.id DESC) AS rnk
    FROM memory_memoryitem i, q
    WHERE i.namespace_id = %s AND i.search_vector @@ q.tsq AND (i.expires_at IS NULL OR i.expires_at > %s){filters}
),
nearest AS (
    SELECT i.id, (e.embedding::{cast} <=> %s::{cast}) AS distance
    FROM memory_memoryembedding e JOIN memory_memoryitem i ON i.id = e.item_id
    WHERE e.model = %s AND e.status = 'ready' AND e.namespace_id = %s AND e.item_version = i.version
      AND i.namespace_id = %s AND (i.expires_at IS NULL OR i.expires_at > %s){filters}
    ORDER BY e.embedding::{cast} <=> %s::{cast}
    LIMIT %s
),
vec AS (
    SELECT id, row_number() OVER (ORDER BY distance, id DESC) AS rnk FROM nearest WHERE distance <= %s
),
fused AS (
    SELECT coalesce(fts.id, vec.id) AS id,
           (coalesce(1.0::float8 / (%s + fts.rnk), 0) + coalesce(1.0::float8 / (%s + vec.rnk), 0))::float8 AS score,
           fts.rnk AS fts_rank, vec.rnk AS vector_rank
    FROM fts FULL OUTER JOIN vec ON fts.id = vec.id
)
SELECT id, score, fts_rank, vector_rank FROM fused
WHERE TRUE{after}
ORDER BY score DESC, id DESC
LIMIT %s
"""


def _vector_literal(vector) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def memory_items_recall(
    *, namespace: MemoryNamespace, query, categories=None, tags=None, limit=None, cursor=None
) -> dict:
    """Full-text search fused with vector similarity when this namespace has vectors for the current embedder.

    With no embedder, no vectors, or an embedder failure, the answer is full-text only and nothing is lost.
    Returns {"items": [... with "score"], "next_cursor", "search": "hybrid" | "fts"}.
    """
    query = clean_query(query)
    categories = clean_filter_list(categories, name="categories")
    tags = clean_filter_list(tags, name="tags")
    limit = clean_limit(limit)
    embedder = get_embedder()
    base_digest = dict(ns=namespace.pk, q=query, categories=categories, tags=tags)
    fts_digest = listing_digest(kind="fts", **base_digest)
    hybrid_digest = listing_digest(kind="hybrid", model=embedder.model, **base_digest)
    position = None
    if cursor:
        # A cursor continues the mode it was made in; an FTS cursor stays FTS even if vectors appear meanwhile.
        try:
            position = decode_cursor(cursor, digest=hybrid_digest)
        except Exception:
            position = decode_cursor(cursor, digest=fts_digest)

    query_vector = None
    want_hybrid = embedder.enabled and (position is None or position["kind"] == "hybrid")
    if want_hybrid:
        # Embedded ahead by the runtime (memory/query_vectors.py), which also checked the namespace has vectors.
        query_vector = prefetched_query_vector(embedder, query)
    if (
        want_hybrid
        and query_vector is None
        and (position is not None or _namespace_has_vectors(namespace, embedder.model))
    ):
        try:
            query_vector = embedder.embed([query_embedding_text(query)])[0]
        except EmbedderError as exc:
            logger.warning("memory recall falls back to full-text search: %s", exc)
        except Exception:
            logger.exception("memory recall falls back to full-text search")
    if position is not None and position["kind"] == "hybrid" and query_vector is None:
        from .errors import invalid

        raise invalid(
            "Vector search is unavailable, so this cursor cannot continue.",
            "Repeat the recall without a cursor to get full-text results.",
            code="invalid_cursor",
        )

    now = clock.now()
    filter_params: list = []
    filters = _filter_sql(categories, tags, filter_params)
    if query_vector is None:
        mode, digest = "fts", fts_digest
        params: list = [FTS_CONFIG, query, namespace.pk, now, *filter_params]
        after = ""
        if position is not None:
            after = " AND (ts_rank(i.search_vector, q.tsq)::float8, i.id) < (%s, %s)"
            params += [position["score"], position["last_id"]]
        sql = _FTS_SQL.format(filters=filters, after=after)
        params.append(limit + 1)
        rows = _run(sql, params, embedder.model, hybrid=False)
    else:
        mode, digest = "hybrid", hybrid_digest
        cast = vector_cast(embedder.dims)
        literal = _vector_literal(query_vector)
        k = settings.MEMORY_RECALL_RRF_K
        params = [FTS_CONFIG, query, namespace.pk, now, *filter_params]
        params += [literal, embedder.model, namespace.pk, namespace.pk, now, *filter_params, literal]
        params += [settings.MEMORY_RECALL_VECTOR_CANDIDATES, settings.MEMORY_RECALL_MAX_DISTANCE, k, k]
        after = ""
        if position is not None:
            after = " AND (score, id) < (%s, %s)"
            params += [position["score"], position["last_id"]]
        params.append(limit + 1)
        sql = _HYBRID_SQL.format(filters=filters, after=after, cast=cast)
        rows = _run(sql, params, embedder.model, hybrid=True)

    page, more = rows[:limit], len(rows) > limit
    results = []
    for item, score, fts_rank, vector_rank in page:
        entry = item_as_dict(item)
        entry["score"] = round(score, 6)
        entry["matched_by"] = [name for name, rank in (("text", fts_rank), ("vector", vector_rank)) if rank]
        results.append(entry)
    next_cursor = None
    if more and page:
        last_item, last_score = page[-1][0], page[-1][1]
        next_cursor = encode_cursor(kind=mode, digest=digest, last_id=last_item.pk, score=last_score)
    return {"items": results, "next_cursor": next_cursor, "search": mode}


_ITEM_COLUMNS = ("id", "content", "title", "category", "tags", "version", "expires_at", "created_at", "updated_at")

# The ranked ids come back with their items and projection states in the same statement: a recall is one round
# trip (two for hybrid, whose index settings go first), not a ranking query followed by an ORM fetch.
_WITH_ITEMS_SQL = """
WITH ranked AS ({ranked})
SELECT ranked.score, ranked.fts_rank, ranked.vector_rank, e.status, e.item_version, {columns}
FROM ranked JOIN memory_memoryitem i ON i.id = ranked.id
LEFT JOIN memory_memoryembedding e ON e.item_id = i.id AND e.model = %s
ORDER BY ranked.score DESC, ranked.id DESC
"""


def _run(sql: str, params: list, model: str, *, hybrid: bool) -> list[tuple[MemoryItem, float, int | None, int | None]]:
    sql = _WITH_ITEMS_SQL.format(ranked=sql.strip(), columns=", ".join(f"i.{column}" for column in _ITEM_COLUMNS))
    params = [*params, model]
    with transaction.atomic() if hybrid else nullcontext(), connection.cursor() as cursor:
        if hybrid:
            # Keep walking the HNSW graph until enough neighbours pass the namespace and filter conditions
            # (one round trip for both settings, local to this transaction).
            cursor.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true)",
                [str(max(settings.MEMORY_RECALL_HNSW_EF_SEARCH, settings.MEMORY_RECALL_VECTOR_CANDIDATES))],
            )
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    ranked = []
    for score, fts_rank, vector_rank, status, embedded_version, *values in rows:
        item = MemoryItem(**dict(zip(_ITEM_COLUMNS, values, strict=True)))
        item.embedding_status, item.embedding_version = status, embedded_version
        ranked.append((item, score, fts_rank, vector_rank))
    return ranked
