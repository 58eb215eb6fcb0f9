import pytest

from memory.tasks import embed_item

pytestmark = pytest.mark.django_db


def _remember(call, content, **extra):
    return call({"operation": "remember", "content": content, **extra})["item"]["id"]


def test_filters_apply_in_sql_not_after_a_top_k(call):
    # 40 strong matches outrank the one tagged item; a post-filter over the top results would lose it
    for n in range(40):
        _remember(call, f"kubernetes kubernetes kubernetes cluster note {n}", category="ops")
    tagged = _remember(
        call, "a kubernetes remark buried in a long text " + "filler " * 50, tags=["rare"], category="misc"
    )
    result = call({"operation": "recall", "query": "kubernetes", "tags": ["rare"], "limit": 5})
    assert [i["id"] for i in result["items"]] == [tagged]
    by_category = call({"operation": "recall", "query": "kubernetes", "categories": ["misc"], "limit": 1})
    assert [i["id"] for i in by_category["items"]] == [tagged]
    listed = call({"operation": "list", "tags": ["rare"], "limit": 1})
    assert [i["id"] for i in listed["items"]] == [tagged] and listed["next_cursor"] is None


def _pages(call, arguments):
    seen, cursor, pages = [], None, 0
    while True:
        page = call({**arguments, **({"cursor": cursor} if cursor else {})})
        assert "items" in page, page
        seen += [i["id"] for i in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            return seen, pages


def test_recall_pages_with_a_keyset_cursor_without_repeats(call):
    ids = {_remember(call, f"roadmap item {'roadmap ' * (n % 4)} number {n}") for n in range(23)}
    seen, pages = _pages(call, {"operation": "recall", "query": "roadmap", "limit": 5})
    assert pages == 5 and len(seen) == len(set(seen)) == 23 and set(seen) == ids
    scores = [i["score"] for i in call({"operation": "recall", "query": "roadmap", "limit": 50})["items"]]
    assert scores == sorted(scores, reverse=True)


def test_hybrid_recall_pages_too(call, concept_embedder):
    ids = [_remember(call, f"flight to city {n} booked") for n in range(12)]
    ids += [_remember(call, f"the plane trip number {n}") for n in range(5)]  # vector-only matches
    for item_id in ids:
        embed_item(item_id)
    seen, _ = _pages(call, {"operation": "recall", "query": "flight", "limit": 4})
    assert len(seen) == len(set(seen)) and set(ids[:12]) <= set(seen)
    assert set(seen) - set(ids[:12]), "the paraphrases should be found through vectors"


def test_a_cursor_belongs_to_its_query(call):
    for n in range(3):
        _remember(call, f"alpha beta {n}")
    cursor = call({"operation": "recall", "query": "alpha", "limit": 1})["next_cursor"]
    assert cursor
    assert call({"operation": "recall", "query": "beta", "cursor": cursor})["error"]["code"] == "invalid_cursor"
    assert call({"operation": "list", "cursor": cursor})["error"]["code"] == "invalid_cursor"


def test_list_pagination_is_stable_while_items_are_added(call):
    first_batch = [_remember(call, f"note {n}") for n in range(10)]
    page = call({"operation": "list", "limit": 4})
    seen = [i["id"] for i in page["items"]]
    cursor = page["next_cursor"]
    added = [_remember(call, f"late note {n}") for n in range(5)]
    while cursor:
        page = call({"operation": "list", "limit": 4, "cursor": cursor})
        seen += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        _remember(call, "even later")
    assert seen == sorted(first_batch, reverse=True)
    assert not set(seen) & set(added)


def test_stop_word_query_finds_nothing_rather_than_failing(call):
    _remember(call, "the and of")
    result = call({"operation": "recall", "query": "the"})
    assert result["items"] == [] and result["search"] == "fts"


def test_the_hnsw_walk_uses_the_configured_width(call, concept_embedder, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for item_id in [_remember(call, f"flight to city {n} booked") for n in range(3)]:
        embed_item(item_id)
    settings.MEMORY_RECALL_HNSW_EF_SEARCH = 123
    with CaptureQueriesContext(connection) as queries:
        result = call({"operation": "recall", "query": "flight"})
    assert result["search"] == "hybrid" and len(result["items"]) == 3
    assert any("set_config('hnsw.ef_search', '123', true)" in q["sql"] for q in queries.captured_queries)
