"""Finding 12: every call billed with its real usage and a cost from the maintained price data (compaction
included), and the context pressure measured with the provider's own counter, headroom being the output the
request allows. Runs a firing inline against the strict Anthropic fake."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.models import AgentConversation, UsageRecord
from providers.billing import embedding_ledger_fields, ledger_fields
from tests.agents.factories import assistant_with
from tests.fakes import FakeAnthropic, Text, Turn

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-5"


@pytest.fixture
def anthropic(monkeypatch, settings):
    settings.AGENT_EXECUTION_MODE = "inline"
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-server-0000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        yield fake


def price(**usage) -> Decimal:
    return calc_price(PriceUsage(**usage), model_ref=MODEL, provider_id="anthropic").total_price


def test_an_llm_step_is_billed_with_its_cost_and_cache_reads_and_writes_apart(owner, anthropic):
    workflow, generation, ids = assistant_with(owner, provider="anthropic", model=MODEL)
    anthropic.push(Turn([Text("hi")], input_tokens=4000, cached_tokens=1000, cache_creation_tokens=2000))
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    row = UsageRecord.objects.get(workflow_id=workflow.pk, kind="llm")
    assert (row.input_tokens, row.cached_input_tokens, row.output_tokens) == (4000, 1000, 13)
    assert row.meta["cache_creation_input_tokens"] == 2000
    expected = price(input_tokens=4000, cache_read_tokens=1000, cache_write_tokens=2000, output_tokens=13)
    assert row.cost == expected.quantize(Decimal("0.000001")) and row.cost > 0
    assert row.meta["price_source"].startswith("genai-prices ")


def test_compaction_is_billed_with_the_summarizers_real_usage(owner, anthropic):
    workflow, generation, ids = assistant_with(owner, provider="anthropic", model=MODEL, compaction_threshold=0.1)
    # Each reply reports 30,000 input tokens: past 10% of the 200k window, so compaction follows the firing (the
    # second one: after the first there is nothing older than the latest turn to summarize).
    anthropic.push(
        Turn([Text("noted")], input_tokens=30_000),
        Turn([Text("noted again")], input_tokens=30_000),
        Turn([Text("Summary: hello.")], input_tokens=700),
    )
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="again")
    rows = UsageRecord.objects.filter(workflow_id=workflow.pk, kind="compaction")
    # The summary call's own row; a summary no smaller than what it would replace is also recorded, as discarded.
    row = rows.get(outcome="ok")
    assert (row.input_tokens, row.output_tokens) == (700, 13)
    assert row.cost == price(input_tokens=700, cache_read_tokens=5, output_tokens=13).quantize(Decimal("0.000001"))
    assert row.cost > 0


def test_pressure_is_counted_by_the_provider_and_headroom_is_the_requests_max_tokens(owner, anthropic):
    workflow, generation, ids = assistant_with(owner, provider="anthropic", model=MODEL)
    anthropic.push(Turn([Text("hello back")]))
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    chat = next(r for r in anthropic.requests if r.path == "/v1/messages")
    counts = [r for r in anthropic.requests if r.path == "/v1/messages/count_tokens"]
    assert len(counts) == 1, "the provider's own counter measures the next request"
    counted = max(1, len(json.dumps(counts[0].body)) // 4)  # what the fake's counter answered
    header = AgentConversation.objects.get(workflow=workflow, agent_node_id=ids["lead"])
    assert header.pressure_input_tokens == counted
    # The counted request is the next one: the stored conversation including this turn's answer.
    assert counts[0].body["messages"][-1]["role"] == "assistant"
    assert header.pressure_output_tokens == chat.body["max_tokens"] > 0  # not 0 although max_output_tokens is unset
    assert header.context_window_tokens == 200_000


def test_ledger_fields_for_an_unknown_model_carry_no_cost_and_say_why():
    fields = ledger_fields(provider="openai", model="gpt-99-unreleased", usage={"input_tokens": 10, "output_tokens": 5})
    assert fields["cost"] is None and "unknown model" in fields["meta"]["price_note"]


def test_embeddings_have_a_ledger_price():
    fields = embedding_ledger_fields(provider="openai", model="text-embedding-3-small", input_tokens=1_000_000)
    assert (
        fields["cost"]
        == calc_price(
            PriceUsage(input_tokens=1_000_000), model_ref="text-embedding-3-small", provider_id="openai"
        ).total_price
    )
    assert fields["cost"] > 0 and fields["meta"]["price_source"].startswith("genai-prices ")


def test_the_context_panel_says_how_pressure_is_measured_and_flags_an_unknown_model(owner, client):
    client.force_login(owner)
    counted, _, _ = assistant_with(owner, provider="anthropic", model=MODEL)
    page = client.get(f"/workflows/{counted.pk}/context/").content.decode()
    assert "Counted by Anthropic&#x27;s own token counter" in page and "ctx-model-note" not in page
    estimated, _, _ = assistant_with(owner, provider="openai_compatible", model="my-local-finetune")
    page = client.get(f"/workflows/{estimated.pk}/context/").content.decode()
    assert "Estimated at about 4 characters per token: this provider has no token counter." in page
    assert "Unknown model: not in the catalogue" in page
