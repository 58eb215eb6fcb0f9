"""Full-text recall bounds its ranking work on broad queries without losing the best matches (memory/selectors.py)."""

import pytest
from django.db import connection

from memory.models import FTS_CONFIG
from memory.services import memory_namespace_get_or_create
from tests.memory.conftest import NODE

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
