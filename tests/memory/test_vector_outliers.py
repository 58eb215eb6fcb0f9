"""Outlier vectors and owner-filtered walks (memory/outliers.py, the vector half of memory/selectors.py).

An HNSW graph keeps few links into a vector unlike its neighbours; a query that lands near such a vector but off
the dense regions walks into them and never reaches it. The benchmark's hand-written memories among 100,000
generated ones are that case (docs/memory.md). These tests build a real HNSW index over a few thousand vectors
shaped like it.
"""

import random

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from memory.embedders.indexes import index_name, outlier_index_name, vector_index_sql
from memory.embedding import embed_items
from memory.models import MemoryEmbedding
from memory.outliers import memory_embeddings_outliers_mark
from memory.selectors import memory_items_recall
from memory.services import memory_item_remember, memory_namespace_get_or_create
from tests.memory.embedders import (
    RANDOM_DIMS,
    RandomEmbedder,
    axis,
    distance,
    noise,
    plus,
    store_random_vectors,
    unit,
)
from tests.memory.helpers import NODE, memory_graph
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

QUERY = "qqzx vector probe"  # matches no item's text: the order is the vector ranking alone


def _index(*, outliers):
    with connection.cursor() as cursor:
        # The test's transaction holds the bulk inserts' deferred foreign-key checks; an index build needs none.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        # Built here over the rows as they are (an index an earlier test left would have grown row by row: another
        # graph). Dropped inside the test's transaction, so it is back afterwards.
        for name in (index_name, outlier_index_name):
            cursor.execute(f"DROP INDEX IF EXISTS {name(RandomEmbedder.model, RandomEmbedder.dims)}")
        cursor.execute(vector_index_sql(RandomEmbedder.model, RandomEmbedder.dims, concurrently=False))
        if outliers:
            cursor.execute(
                vector_index_sql(RandomEmbedder.model, RandomEmbedder.dims, concurrently=False, outliers=True)
            )
        cursor.execute("ANALYZE memory_memoryembedding")
        # At a few thousand rows an exact scan is the cheaper plan; at 100,000 the planner walks the index. Sorting
        # is made dear here so the recall walks it too.
        cursor.execute("SET LOCAL enable_sort = off")


@pytest.fixture
def random_embedder(settings):
    settings.MEMORY_EMBEDDER = "tests.memory.embedders:RandomEmbedder"
    settings.MEMORY_RECALL_VECTOR_CANDIDATES = 10
    settings.MEMORY_RECALL_HNSW_EF_SEARCH = 10
    settings.MEMORY_RECALL_MAX_DISTANCE = 2.0
    yield
    RandomEmbedder.fixed = {}


@pytest.fixture
def lonely(owner, workflow, random_embedder):
    """One namespace: a dense cluster ~0.4 from the query, and a few items nearer to it (~0.25) that are far from
    the cluster (~0.75) and from each other (~0.5), stored early so the cluster crowds them out of its links."""
    rng = random.Random(20261203)
    query = unit(plus(axis(0, 0.6), axis(1, 0.8)))
    RandomEmbedder.fixed = {QUERY: query}
    mine = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=NODE)
    rows = [(mine, unit(plus(axis(0), noise(rng, 0.05)))) for _ in range(3000)]
    lonely = [unit(plus(axis(1), axis(2 + n, 0.8 + 0.05 * n), axis(0, 0.3))) for n in range(5)]
    rows[100:100] = [(mine, vector) for vector in lonely]
    items = store_random_vectors(rows)
    vectors = {item.pk: vector for item, (_, vector) in zip(items, rows, strict=True)}
    lonely_ids = [item.pk for item in items[100:105]]
    return mine, query, vectors, lonely_ids


def test_the_vectors_with_no_near_neighbour_are_marked_outliers(lonely):
    namespace, _, vectors, lonely_ids = lonely
    _index(outliers=False)
    changed = memory_embeddings_outliers_mark(item_ids=list(vectors), model=RandomEmbedder.model, dims=RANDOM_DIMS)
    marked = set(
        MemoryEmbedding.objects.filter(model=RandomEmbedder.model, outlier=True).values_list("item_id", flat=True)
    )
    assert marked == set(lonely_ids) and changed == len(lonely_ids)
    # Marking again writes nothing: only a change is written (each written row is a new tuple in the main graph)
    assert memory_embeddings_outliers_mark(item_ids=list(vectors), model=RandomEmbedder.model, dims=RANDOM_DIMS) == 0


def test_an_outlier_the_main_walk_misses_is_found_through_the_outlier_index(lonely, settings):
    namespace, query, vectors, lonely_ids = lonely
    memory_embeddings_outliers_mark(item_ids=list(vectors), model=RandomEmbedder.model, dims=RANDOM_DIMS)
    exact = sorted(vectors, key=lambda pk: distance(vectors[pk], query))
    assert exact[:5] == sorted(lonely_ids, key=lambda pk: distance(vectors[pk], query))

    # The case: the main walk alone fills its candidates from the cluster and misses the nearer lonely items.
    # pgvector draws each node's HNSW layer at random, so about one graph in ten happens to link them well enough:
    # build again until the graph is the case (each build misses them with p ~0.9; five tries fail ~1 in 100,000).
    settings.MEMORY_RECALL_OUTLIER_CANDIDATES = 0
    for _attempt in range(5):
        _index(outliers=True)
        main_only = [item["id"] for item in memory_items_recall(namespace=namespace, query=QUERY, limit=10)["items"]]
        if not set(lonely_ids) <= set(main_only[:5]):
            break
    assert not set(lonely_ids) <= set(main_only[:5]), main_only

    settings.MEMORY_RECALL_OUTLIER_CANDIDATES = 10
    result = memory_items_recall(namespace=namespace, query=QUERY, limit=10)
    assert result["search"] == "hybrid"
    assert [item["id"] for item in result["items"]] == exact[:10]
    assert all(item["matched_by"] == ["vector"] for item in result["items"])
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (COSTS OFF) SELECT 1 FROM memory_memoryembedding e WHERE e.model = %s AND e.outlier "
            f"ORDER BY e.embedding::vector({RANDOM_DIMS}) <=> %s::vector({RANDOM_DIMS}) LIMIT 10",
            [RandomEmbedder.model, "[" + ",".join(repr(x) for x in query) + "]"],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan using memory_emb_out_" in plan, plan


def test_a_recall_finds_its_owners_items_when_other_owners_items_are_nearer(owner, workflow, random_embedder, settings):
    """The walk is filtered by namespace while it walks (iterative scan): 2,700 of another owner's items sit right
    at the query, and the 300 of this namespace, all farther, still fill the page in exact order."""
    settings.MEMORY_RECALL_VECTOR_CANDIDATES = settings.MEMORY_RECALL_HNSW_EF_SEARCH = 40  # the defaults
    rng = random.Random(7)
    query = unit(plus(axis(0), axis(1, 0.2)))
    RandomEmbedder.fixed = {QUERY: query}
    stranger = get_user_model().objects.create_user("stranger", password="stranger-password-1")
    theirs_workflow = Workflow.objects.create(owner=stranger, name="theirs", graph=memory_graph(NODE))
    theirs = memory_namespace_get_or_create(owner=stranger, workflow=theirs_workflow, node_id=NODE)
    mine = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=NODE)
    rows = [(theirs, unit(plus(query, noise(rng, 0.1)))) for _ in range(2700)]
    # Mine: in 30 directions off the query, each farther than the last, so the exact order is clear-cut.
    rows += [(mine, unit(plus(query, axis(2 + n % 30, 0.8 + 2.0 * n / 300), noise(rng, 0.02)))) for n in range(300)]
    rng.shuffle(rows)
    items = store_random_vectors(rows)
    _index(outliers=True)
    mine_vectors = {item.pk: vector for item, (ns, vector) in zip(items, rows, strict=True) if ns == mine}
    farthest_theirs = max(distance(vector, query) for ns, vector in rows if ns == theirs)
    nearest_mine = min(distance(vector, query) for vector in mine_vectors.values())
    assert farthest_theirs < nearest_mine  # every one of theirs is nearer than any of mine

    result = memory_items_recall(namespace=mine, query=QUERY, limit=10)
    exact = sorted(mine_vectors, key=lambda pk: distance(mine_vectors[pk], query))
    assert [item["id"] for item in result["items"]] == exact[:10]


@pytest.mark.django_db(transaction=True)
def test_the_embedding_task_marks_a_vector_with_no_near_neighbour(owner, workflow, random_embedder):
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=NODE)
    first, twin, apart = unit(axis(0)), unit(plus(axis(0), axis(1, 0.1))), unit(axis(5))
    RandomEmbedder.fixed = {"first note": first, "its twin": twin, "something else": apart}
    ids = {}
    for text in ("first note", "its twin", "something else"):
        item = memory_item_remember(namespace=namespace, content=text, actor="owner:1", idempotency_key=text)
        ids[text] = item["item"]["id"] if isinstance(item, dict) else item.pk
        assert embed_items([ids[text]]) == ["ready"]
    outlier = dict(MemoryEmbedding.objects.filter(model=RandomEmbedder.model).values_list("item_id", "outlier"))
    # The first had nothing near it when stored and keeps its mark; the twin had the first within ~0.005.
    assert outlier == {ids["first note"]: True, ids["its twin"]: False, ids["something else"]: True}
