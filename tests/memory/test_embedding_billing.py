"""Embedding calls are billed to the usage ledger: the real openai SDK against the strict fake's /v1/embeddings."""

from decimal import Decimal

import pytest
from django.core.management import call_command

from conversations.models import UsageRecord
from memory.models import MemoryEmbedding
from memory.tasks import embed_item
from providers.pricing import embedding_cost
from tests.fakes import ErrorReply, FakeOpenAIResponses
from tests.memory.helpers import NODE

pytestmark = pytest.mark.django_db

MODEL = "text-embedding-3-small"


@pytest.fixture
def fake_openai(settings, monkeypatch):
    settings.MEMORY_EMBEDDER = "openai"
    settings.MEMORY_OPENAI_EMBEDDING_MODEL = MODEL
    settings.MEMORY_OPENAI_EMBEDDING_DIMS = None
    with FakeOpenAIResponses() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-embeddings")
        yield fake


def embedding_calls(fake):
    return [r for r in fake.requests if r.path == "/v1/embeddings"]


def test_an_item_embedding_is_billed_once_to_its_owner_and_workflow(call, fake_openai, owner, workflow):
    content = "The deploy key rotates every ninety days, on the first Monday"
    item = call({"operation": "remember", "title": "Deploy key", "content": content})["item"]

    assert embed_item(item["id"]) == "ready"

    [request] = embedding_calls(fake_openai)
    assert request.body["model"] == MODEL and request.body["input"] == [f"Deploy key\n{content}"]
    [row] = UsageRecord.objects.filter(kind="embedding")
    reported = len(f"Deploy key\n{content}") // 4  # what the fake reported as usage.prompt_tokens
    assert (row.provider, row.model, row.outcome) == ("openai", MODEL, "ok")
    assert (row.owner_id, row.workflow_id, row.agent_node_id) == (owner.pk, workflow.pk, "")
    assert row.input_tokens == reported and row.output_tokens == 0
    expected = embedding_cost(provider="openai", model=MODEL, input_tokens=reported)
    assert expected is not None and row.cost == expected.amount.quantize(Decimal("0.000001"))
    assert row.meta["purpose"] == "index" and row.meta["memory_node_id"] == NODE and row.meta["price_source"]
    projection = MemoryEmbedding.objects.get(item_id=item["id"])
    assert projection.status == "ready" and len(projection.embedding) == 1536

    # A retried task finds the vector current: no second call, no second row.
    assert embed_item(item["id"]) == "skipped"
    assert len(embedding_calls(fake_openai)) == 1 and UsageRecord.objects.filter(kind="embedding").count() == 1

    # A retry whose first attempt was billed but lost its vector calls again under the same key: still one row.
    MemoryEmbedding.objects.filter(item_id=item["id"]).delete()
    assert embed_item(item["id"]) == "ready"
    assert len(embedding_calls(fake_openai)) == 2 and UsageRecord.objects.filter(kind="embedding").count() == 1

    # An edit is a new version: a new call, a new row.
    call({"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"content": "Every 30 days"}})
    assert embed_item(item["id"]) == "ready"
    assert UsageRecord.objects.filter(kind="embedding").count() == 2


def test_a_recall_query_embedding_is_billed_and_a_refused_call_is_not(call, fake_openai, owner, workflow):
    item = call({"operation": "remember", "content": "Invoices go to billing@acme.test"})["item"]
    embed_item(item["id"])

    recalled = call({"operation": "recall", "query": "where do invoices go"})

    assert recalled["search"] == "hybrid" and recalled["items"][0]["id"] == item["id"]
    rows = list(UsageRecord.objects.filter(kind="embedding").order_by("id"))
    assert [r.meta["purpose"] for r in rows] == ["index", "recall"]
    assert (rows[1].owner_id, rows[1].workflow_id, rows[1].input_tokens) == (owner.pk, workflow.pk, 5)

    # The provider refuses the next call: the recall falls back to full text and nothing is billed.
    fake_openai.embedding_errors.append(ErrorReply(400, "'$.input' is invalid."))
    assert call({"operation": "recall", "query": "invoices"})["search"] == "fts"
    assert UsageRecord.objects.filter(kind="embedding").count() == 2


def test_the_strict_fake_refuses_what_the_api_refuses(fake_openai):
    import openai

    client = openai.OpenAI(api_key="sk-test", base_url=fake_openai.base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="input' is invalid"):
        client.embeddings.create(model=MODEL, input=["fine", ""])
    with pytest.raises(openai.BadRequestError, match="does not support specifying dimensions"):
        client.embeddings.create(model="text-embedding-ada-002", input="a", dimensions=256)
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.embeddings.create(model="no-such-embedder", input="a")
    answer = client.embeddings.create(model=MODEL, input=["one", "two"], dimensions=256)
    assert [len(row.embedding) for row in answer.data] == [256, 256] and answer.usage.prompt_tokens == 2


def test_reindex_all_is_a_new_billed_attempt(call, fake_openai):
    item = call({"operation": "remember", "content": "Standup is at nine"})["item"]
    embed_item(item["id"])

    call_command("memory_reindex", "--all", "--no-progress")

    assert len(embedding_calls(fake_openai)) == 2
    assert UsageRecord.objects.filter(kind="embedding").count() == 2


def test_the_local_embedder_costs_nothing_and_writes_no_row(call, concept_embedder):
    item = call({"operation": "remember", "content": "Prefers tea"})["item"]
    assert embed_item(item["id"]) == "ready"
    call({"operation": "recall", "query": "tea"})
    assert not UsageRecord.objects.filter(kind="embedding").exists()


def test_a_query_embedded_ahead_of_the_recall_is_billed_once(call, fake_openai, owner, workflow):
    from memory.query_vectors import prefetch_recall_query

    item = call({"operation": "remember", "content": "The printer toner is in cupboard B"})["item"]
    embed_item(item["id"])

    prefetch_recall_query({"operation": "recall", "query": "printer toner"}, workflow=workflow, node_id=NODE)
    recalled = call({"operation": "recall", "query": "printer toner"})

    assert recalled["search"] == "hybrid"
    assert len(embedding_calls(fake_openai)) == 2  # the item, then the query once: the recall took the prefetch
    rows = list(UsageRecord.objects.filter(kind="embedding").order_by("id"))
    assert [(r.meta["purpose"], r.owner_id, r.workflow_id) for r in rows] == [
        ("index", owner.pk, workflow.pk),
        ("recall", owner.pk, workflow.pk),
    ]
