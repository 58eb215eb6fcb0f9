"""Reads. Expired items are filtered in SQL here, so they are invisible everywhere before any purge runs."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import connection
from django.db.models import IntegerField, OuterRef, Q, QuerySet, Subquery

from . import clock
from .billing import embedding_call_record, query_call_key
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


def memory_item_get(*, namespace: MemoryNamespace, item_id) -> dict:
    item_id = clean_id(item_id)
    item = with_indexing_state(live_items(namespace).filter(pk=item_id)).first()
    if item is None:
        raise item_not_found()
    return {"item": item_as_dict(item)}


def _filter_sql(categories: list[str], tags: list[str], params: dict, alias: str = "i") -> str:
    sql = ""
    if categories:
        sql += f" AND {alias}.category = ANY(%(categories)s)"
        params["categories"] = categories
    if tags:
        sql += f" AND {alias}.tags && %(tags)s::varchar[]"
        params["tags"] = tags
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


# Namespaces seen with ready vectors, and until when that answer is reused: a recall with no vector embedded ahead
# (an API search) asks before embedding its query, and asking costs a round trip before the recall's own. Only a
# "yes" is kept, briefly: vectors rarely all go, and if they did, the hybrid statement still ranks the text matches
# (its vector list is then empty), so a stale "yes" costs a query embedding, never a wrong answer.
_HAS_VECTORS_TTL_S = 60.0
_has_vectors_until: dict[tuple[int, str], float] = {}


def _namespace_has_vectors(namespace: MemoryNamespace, model: str) -> bool:
    key, now = (namespace.pk, model), time.monotonic()
    if _has_vectors_until.get(key, 0.0) > now:
        return True
    found = MemoryEmbedding.objects.filter(
        namespace_id=namespace.pk, model=model, status=MemoryEmbedding.Status.READY
    ).exists()
    if found:
        if len(_has_vectors_until) > 10_000:
            _has_vectors_until.clear()
        _has_vectors_until[key] = now + _HAS_VECTORS_TTL_S
    return found


# The text matches a recall ranks. Ranking needs each match's tsvector, which the GIN index does not hold: every
# ranked match is a heap visit (~1 us), so a query matching 6,000 items cost 6-8 ms. The work is bounded:
# - the matches among the newest ~MEMORY_RECALL_FTS_WINDOW items of the namespace are always ranked (one bitmap AND
#   of the text index and an id range);
# - when fewer than MEMORY_RECALL_FTS_BROAD_MATCHES of them match, the query is narrow and every older match is
#   ranked too, as before;
# - when at least that many match, the query is broad and, of the older matches, only the salient ones are ranked:
#   a query word in the title or twice in the content (`search_salient`, a small second index). Those are the only
#   matches a single-word query ranks above "once, in the content"; the rest tie, and ties go newest first, so the
#   window already holds the best of them. What is given up is the order of the older non-salient matches of a
#   broad multi-word query (ts_rank's proximity between the words), and paging past the window's matches.
# The expiry, category and tag filters apply in every branch. docs/memory.md has the figures.
_MATCHES_CTE = """
q AS (SELECT websearch_to_tsquery(%(fts_config)s::regconfig, %(query)s) AS tsq),
window_floor AS (
    -- Where the newest ~MEMORY_RECALL_FTS_WINDOW items of the namespace start, from its id range and item count
    -- (ids are shared by all namespaces): three index probes, where counting back through the namespace's newest
    -- rows would check the visibility of each (~1,000 heap fetches on freshly written pages). It is approximate:
    -- a namespace written in bursts gets a wider or narrower window, which changes the work, never the answer's
    -- guarantee (a query is "broad" only when the window holds enough matches).
    SELECT coalesce(hi.id - ceil(%(window)s::float8 * (hi.id - lo.id + 1) / greatest(n.item_count, 1))::bigint, 0)
           AS id
    FROM memory_memorynamespace n
    -- Ordered as the (namespace, -id) index is, so each is one probe of it (min/max would take the primary key).
    LEFT JOIN LATERAL (
        SELECT w.id FROM memory_memoryitem w WHERE w.namespace_id = n.id ORDER BY w.namespace_id, w.id DESC LIMIT 1
    ) hi ON TRUE
    LEFT JOIN LATERAL (
        SELECT w.id FROM memory_memoryitem w WHERE w.namespace_id = n.id ORDER BY w.namespace_id DESC, w.id LIMIT 1
    ) lo ON TRUE
    WHERE n.id = %(ns)s
),
recent AS MATERIALIZED (
    SELECT i.id, i.search_vector
    FROM memory_memoryitem i, q
    WHERE i.namespace_id = %(ns)s AND i.search_vector @@ q.tsq AND i.id > (SELECT id FROM window_floor)
      AND (i.expires_at IS NULL OR i.expires_at > %(now)s){filters}
),
broad AS (SELECT count(*) >= %(broad)s AS yes FROM recent),
matches AS (
    SELECT id, search_vector FROM recent
    UNION ALL
    SELECT i.id, i.search_vector
    FROM memory_memoryitem i, q
    WHERE NOT (SELECT yes FROM broad) AND i.namespace_id = %(ns)s AND i.search_vector @@ q.tsq
      AND i.id + 0 <= (SELECT id FROM window_floor)
      AND (i.expires_at IS NULL OR i.expires_at > %(now)s){filters}
    UNION ALL
    -- The older branches test the id on the rows they visit (`+ 0` keeps the planner from building a bitmap of every
    -- older id), and this one checks the full tsvector on the few salient rows only (coalesce: not through its index).
    SELECT i.id, i.search_vector
    FROM memory_memoryitem i, q
    WHERE (SELECT yes FROM broad) AND i.namespace_id = %(ns)s AND i.search_salient @@ q.tsq
      AND coalesce(i.search_vector @@ q.tsq, false) AND i.id + 0 <= (SELECT id FROM window_floor)
      AND (i.expires_at IS NULL OR i.expires_at > %(now)s){filters}
)"""

_FTS_SQL = """
WITH {matches}
SELECT m.id, ts_rank(m.search_vector, q.tsq)::float8 AS score, 1 AS fts_rank, NULL::bigint AS vector_rank
FROM matches m, q
WHERE TRUE{after}
ORDER BY score DESC, m.id DESC
LIMIT %(limit)s
"""

# Reciprocal rank fusion of the full-text ranking and the nearest vectors (the top candidates within a distance).
# Filters apply inside both lists, in SQL. The walk's iterative scan (needed so the namespace and filters do not
# starve it) returns rows in *relaxed* order: each further batch of the walk can hold rows nearer than the last of
# the previous one. The planner still believes `nearest` comes out sorted by distance (it has ORDER BY ... LIMIT)
# and would rank `vec` with an incremental sort that keeps that stream order, so a near item found by the second
# batch ranked ~37th instead of 1st. `distance + 0` is not the presorted key, so `vec` is ranked by a real sort.
# The HNSW walk's settings are set by the statement itself: the one-time filter on `nearest` runs before the index
# scan fetches its first row, which is when pgvector reads them, so a hybrid recall is one statement.
# One walk of a vector index for `nearest` (below): the main one, or the outliers' (`{outlier}` names the column).
_VECTOR_WALK = """(SELECT i.id, (e.embedding::{cast} <=> %(vector)s::{cast}) AS distance
    FROM memory_memoryembedding e JOIN memory_memoryitem i ON i.id = e.item_id
    WHERE (SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)
                  || set_config('hnsw.ef_search', %(ef_search)s, true)) IS NOT NULL
      AND e.model = %(model)s{outlier} AND e.status = 'ready' AND e.namespace_id = %(ns)s
      AND e.item_version = i.version
      AND i.namespace_id = %(ns)s AND (i.expires_at IS NULL OR i.expires_at > %(now)s){filters}
    ORDER BY e.embedding::{cast} <=> %(vector)s::{cast}
    LIMIT %({limit})s)"""

_HYBRID_SQL = """
WITH {matches},
fts AS (
    SELECT m.id, row_number() OVER (ORDER BY ts_rank(m.search_vector, q.tsq) DESC, m.id DESC) AS rnk
    FROM matches m, q
),
nearest AS MATERIALIZED (
    {main_walk}
    UNION
    -- The second walk, over the outliers' own small index (memory/outliers.py): the vectors the main graph links
    -- poorly. Its finds join the main walk's and are ranked with them by distance in `vec`.
    {outlier_walk}
),
vec AS (
    SELECT id, row_number() OVER (ORDER BY distance + 0, id DESC) AS rnk FROM nearest WHERE distance <= %(max_distance)s
),
fused AS (
    SELECT coalesce(fts.id, vec.id) AS id,
           (coalesce(1.0::float8 / (%(rrf_k)s + fts.rnk), 0) + coalesce(1.0::float8 / (%(rrf_k)s + vec.rnk), 0))::float8
               AS score,
           fts.rnk AS fts_rank, vec.rnk AS vector_rank
    FROM fts FULL OUTER JOIN vec ON fts.id = vec.id
)
SELECT id, score, fts_rank, vector_rank FROM fused
WHERE TRUE{after}
ORDER BY score DESC, id DESC
LIMIT %(limit)s
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
            vectors, input_tokens = embedder.embed_measured([query_embedding_text(query)])
            query_vector = vectors[0]
            # The one write in this read: the provider call happened, so it is billed (insert-only, own savepoint).
            embedding_call_record(
                embedder=embedder,
                input_tokens=input_tokens,
                idempotency_key=query_call_key(),
                owner_id=namespace.owner_id,
                workflow_id=namespace.workflow_id,
                memory_node_id=namespace.node_id,
                purpose="recall",
                texts=1,
            )
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

    params: dict = {
        "fts_config": FTS_CONFIG,
        "query": query,
        "ns": namespace.pk,
        "now": clock.now(),
        "window": settings.MEMORY_RECALL_FTS_WINDOW,
        "broad": settings.MEMORY_RECALL_FTS_BROAD_MATCHES,
        "limit": limit + 1,
        "model": embedder.model,
    }
    filters = _filter_sql(categories, tags, params)
    matches = _MATCHES_CTE.format(filters=filters)
    after = ""
    if query_vector is None:
        mode, digest = "fts", fts_digest
        if position is not None:
            after = " AND (ts_rank(m.search_vector, q.tsq)::float8, m.id) < (%(after_score)s, %(after_id)s)"
        sql = _FTS_SQL.format(matches=matches, after=after)
    else:
        mode, digest = "hybrid", hybrid_digest
        params.update(
            vector=_vector_literal(query_vector),
            ef_search=str(max(settings.MEMORY_RECALL_HNSW_EF_SEARCH, settings.MEMORY_RECALL_VECTOR_CANDIDATES)),
            candidates=settings.MEMORY_RECALL_VECTOR_CANDIDATES,
            outlier_candidates=settings.MEMORY_RECALL_OUTLIER_CANDIDATES,
            max_distance=settings.MEMORY_RECALL_MAX_DISTANCE,
            rrf_k=settings.MEMORY_RECALL_RRF_K,
        )
        if position is not None:
            after = " AND (score, id) < (%(after_score)s, %(after_id)s)"
        cast = vector_cast(embedder.dims)
        main_walk, outlier_walk = (
            _VECTOR_WALK.format(cast=cast, outlier=outlier, filters=filters, limit=limit)
            for outlier, limit in (("", "candidates"), (" AND e.outlier", "outlier_candidates"))
        )
        sql = _HYBRID_SQL.format(matches=matches, after=after, main_walk=main_walk, outlier_walk=outlier_walk)
    if position is not None:
        params.update(after_score=position["score"], after_id=position["last_id"])
    rows = _run(sql, params)

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
# trip, not a ranking query followed by an ORM fetch.
_WITH_ITEMS_SQL = """
WITH ranked AS ({ranked})
SELECT ranked.score, ranked.fts_rank, ranked.vector_rank, e.status, e.item_version, {columns}
FROM ranked JOIN memory_memoryitem i ON i.id = ranked.id
LEFT JOIN memory_memoryembedding e ON e.item_id = i.id AND e.model = %(model)s
ORDER BY ranked.score DESC, ranked.id DESC
"""


def _run(sql: str, params: dict) -> list[tuple[MemoryItem, float, int | None, int | None]]:
    sql = _WITH_ITEMS_SQL.format(ranked=sql.strip(), columns=", ".join(f"i.{column}" for column in _ITEM_COLUMNS))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    ranked = []
    for score, fts_rank, vector_rank, status, embedded_version, *values in rows:
        item = MemoryItem(**dict(zip(_ITEM_COLUMNS, values, strict=True)))
        item.embedding_status, item.embedding_version = status, embedded_version
        ranked.append((item, score, fts_rank, vector_rank))
    return ranked
