"""Full-text recall bounds its ranking work on broad queries without losing the best matches (memory/selectors.py)."""

import pytest
from django.db import connection

from memory.models import FTS_CONFIG
from memory.services import memory_namespace_get_or_create
from tests.memory.helpers import NODE

pytestmark = pytest.mark.django_db

WINDOW = 60
BROAD = 51


@pytest.fixture
def bounded(settings, fts_only):
    settings.MEMORY_RECALL_FTS_WINDOW = WINDOW
    settings.MEMORY_RECALL_FTS_BROAD_MATCHES = BROAD


def _remember(call, content, title=""):
    arguments = {"operation": "remember", "content": content}
    if title:
        arguments["title"] = title
    return call(arguments)["item"]["id"]


def _full_ranking(namespace, query, limit):
    """Every match ranked, as recall did before the bound: the reference the bounded answer must equal."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.id FROM memory_memoryitem i, websearch_to_tsquery(%s::regconfig, %s) q "
            "WHERE i.namespace_id = %s AND i.search_vector @@ q "
            "ORDER BY ts_rank(i.search_vector, q)::float8 DESC, i.id DESC LIMIT %s",
            [FTS_CONFIG, query, namespace.pk, limit],
        )
        return [row[0] for row in cursor.fetchall()]


def test_a_broad_query_still_returns_its_best_matches_when_they_are_old(call, owner, workflow, bounded):
    # The best matches come first, so they are the oldest: outside the window of the newest items
    in_title = _remember(call, "Holiday plans for the spring", title="Nora")
    twice = _remember(call, "Nora said Nora will take the Friday shift")
    old_plain = _remember(call, "Nora reviewed the invoice")
    for n in range(WINDOW + 20):
        _remember(call, f"Ticket {n} was closed by Nora")
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=NODE)

    recalled = call({"operation": "recall", "query": "Nora", "limit": 10})
    ids = [item["id"] for item in recalled["items"]]
    # The title match and the repeated mention rank above every single mention, old as they are
    assert ids[:2] == [in_title, twice]
    assert old_plain not in ids
    # ...and the whole page is what ranking every match gives
    assert ids == _full_ranking(namespace, "Nora", 10)


def test_a_narrow_query_ranks_every_match_however_old(call, owner, workflow, bounded):
    old = [_remember(call, f"Priya owns the renewal number {n}") for n in range(3)]
    for n in range(WINDOW + 20):
        _remember(call, f"Ticket {n} was closed by Nora")
    recalled = call({"operation": "recall", "query": "Priya renewal"})
    assert sorted(item["id"] for item in recalled["items"]) == sorted(old)


def test_a_broad_query_with_filters_applies_them_in_the_old_matches_too(call, bounded):
    tagged = call({"operation": "remember", "content": "Nora and Nora again", "tags": ["vip"]})["item"]["id"]
    _remember(call, "Nora and Nora once more, untagged")
    for n in range(WINDOW + 20):
        call({"operation": "remember", "content": f"Ticket {n} was closed by Nora", "tags": ["vip"]})
    recalled = call({"operation": "recall", "query": "Nora", "tags": ["vip"], "limit": 5})
    assert recalled["items"][0]["id"] == tagged
    assert all("vip" in item["tags"] for item in recalled["items"])


def test_a_recall_is_one_statement_and_hybrid_sets_its_hnsw_walk_itself(call, owner, workflow, settings):
    from django.db import connection as db
    from django.test.utils import CaptureQueriesContext

    from memory.query_vectors import prefetch_recall_query
    from memory.selectors import memory_items_recall
    from memory.tasks import embed_item

    settings.MEMORY_EMBEDDER = "tests.memory.embedders:ConceptEmbedder"
    settings.MEMORY_RECALL_HNSW_EF_SEARCH = 123
    for text in ("The owner drinks espresso at breakfast", "Printer toner is in the cupboard"):
        embed_item(call({"operation": "remember", "content": text})["item"]["id"])
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=NODE)
    arguments = {"operation": "recall", "query": "morning coffee"}
    prefetch_recall_query(arguments, workflow=workflow, node_id=NODE)  # as the runtime does, before its lock

    with CaptureQueriesContext(db) as queries:
        recalled = memory_items_recall(namespace=namespace, query="morning coffee")
    assert recalled["search"] == "hybrid" and "vector" in recalled["items"][0]["matched_by"]
    assert len(queries.captured_queries) == 1, [q["sql"][:80] for q in queries.captured_queries]
    # The statement set the walk's width for its own transaction (the test runs inside one)
    with db.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
        assert cursor.fetchone() == ("123", "relaxed_order")

    settings.MEMORY_EMBEDDER = "none"
    with CaptureQueriesContext(db) as queries:
        recalled = memory_items_recall(namespace=namespace, query="espresso")
    assert recalled["search"] == "fts" and len(recalled["items"]) == 1
    assert len(queries.captured_queries) == 1


def test_a_search_with_no_vector_embedded_ahead_asks_once_whether_the_namespace_has_vectors(
    call, owner, workflow, settings
):
    """An API search embeds its query at the recall, and first asks whether the namespace has vectors at all (no
    embedding for a text-only namespace). A "yes" is kept a while, so the next search is the recall statement alone."""
    from django.db import connection as db
    from django.test.utils import CaptureQueriesContext

    from memory.selectors import memory_items_recall
    from memory.tasks import embed_item

    settings.MEMORY_EMBEDDER = "tests.memory.embedders:ConceptEmbedder"
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=NODE)
    with CaptureQueriesContext(db) as queries:
        assert memory_items_recall(namespace=namespace, query="morning coffee")["search"] == "fts"
    assert len(queries.captured_queries) == 2  # asked (no vectors: nothing embedded), then the text recall
    embed_item(call({"operation": "remember", "content": "The owner drinks espresso at breakfast"})["item"]["id"])

    with CaptureQueriesContext(db) as queries:
        assert memory_items_recall(namespace=namespace, query="morning coffee")["search"] == "hybrid"
    assert len(queries.captured_queries) == 2  # a "no" is not kept: asked again, then the hybrid recall
    with CaptureQueriesContext(db) as queries:
        recalled = memory_items_recall(namespace=namespace, query="morning coffee")
    assert recalled["search"] == "hybrid" and "vector" in recalled["items"][0]["matched_by"]
    assert len(queries.captured_queries) == 1, [q["sql"][:80] for q in queries.captured_queries]
