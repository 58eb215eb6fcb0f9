"""Billing at the edges (issue 30 #10-#14): every price here is computed in the test straight from `genai-prices`
(the maintained price data), never from the adapters' or the ledger's arithmetic."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from providers.billing import ledger_fields

USAGE = {"input_tokens": 120_000, "cached_tokens": 20_000, "output_tokens": 3_000, "reasoning_tokens": 1_000}


def published(model: str, provider_id: str, *, input_tokens, cached_tokens=0, output_tokens=0, written=0) -> Decimal:
    usage = PriceUsage(
        input_tokens=input_tokens,
        cache_read_tokens=cached_tokens or None,
        cache_write_tokens=written or None,
        output_tokens=output_tokens,
    )
    return Decimal(calc_price(usage, model_ref=model, provider_id=provider_id).total_price)


# --- 10. every runtime priced from genai-prices, an unknown model unpriced ---------------------------------------


@pytest.mark.parametrize(
    ("provider", "model", "price_provider"),
    [
        ("codex_cli", "gpt-5.5", "openai"),
        ("codex_cli", "gpt-5.6", "openai"),
        ("codex_cli", "gpt-5", "openai"),
        ("claude_code", "claude-opus-4-7", "anthropic"),
        ("claude_code", "claude-sonnet-4-5", "anthropic"),
    ],
)
def test_10_the_cli_runtimes_are_priced_from_genai_prices(provider, model, price_provider):
    fields = ledger_fields(provider=provider, model=model, usage=USAGE)
    expected = published(model, price_provider, input_tokens=120_000, cached_tokens=20_000, output_tokens=3_000)
    assert fields["cost"] == expected
    assert fields["meta"]["price_source"].startswith("genai-prices")


@pytest.mark.parametrize("provider", ["codex_cli", "claude_code"])
def test_10_a_model_genai_prices_does_not_know_has_no_price(provider):
    fields = ledger_fields(provider=provider, model="zz-model-nobody-knows", usage=USAGE)
    assert fields["cost"] is None
    assert "no price" in fields["meta"]["price_note"]


# --- 11. cache writes read and priced above input ----------------------------------------------------------------


def test_11_openai_cache_writes_are_read_and_priced_as_writes(openai_fake):
    from providers import ChatRequest, ChatUnifier
    from tests.fakes import Text, Turn

    from .loop import opening

    openai_fake.push(Turn([Text("ok")], input_tokens=50_000, cached_tokens=10_000, cache_creation_tokens=30_000))
    request = ChatRequest(
        provider="openai", model="gpt-5.6", messages=opening(), api_key="sk-test-11", base_url=openai_fake.base_url
    )
    result = ChatUnifier().chat(request)
    assert result.usage.cache_creation_tokens == 30_000 and result.usage.cached_tokens == 10_000
    fields = ledger_fields(provider="openai", model="gpt-5.6", usage=result.message["usage"])
    assert fields["meta"]["cache_creation_input_tokens"] == 30_000
    expected = published(
        "gpt-5.6", "openai", input_tokens=50_000, cached_tokens=10_000, written=30_000, output_tokens=13
    )
    assert fields["cost"] == expected
    plain = published("gpt-5.6", "openai", input_tokens=50_000, cached_tokens=10_000, output_tokens=13)
    assert expected > plain  # writes cost more than plain input for this model


# --- 12. several calls priced one by one, then added -------------------------------------------------------------


def test_12_gemini_continuation_hops_are_priced_each_on_its_own(gemini_fake):
    from types import SimpleNamespace

    from agents.usage import llm_usage_entry
    from providers import ChatRequest, ChatUnifier
    from tests.fakes import Text, Turn

    from .loop import opening

    hop = {"input_tokens": 150_000, "cached_tokens": 0, "output_tokens": 13, "reasoning_tokens": 0}
    gemini_fake.push(
        Turn([Text("The first half, ")], stop="continuation", **hop), Turn([Text("and the second.")], **hop)
    )
    request = ChatRequest(
        provider="gemini", model="gemini-2.5-pro", messages=opening(), api_key="AIza-12", base_url=gemini_fake.base_url
    )
    result = ChatUnifier().chat(request)
    assert result.usage.input_tokens == 300_000  # two requests: 150k each, over Gemini 2.5 Pro's 200k tier if summed
    one = published("gemini-2.5-pro", "google", input_tokens=150_000, output_tokens=13)
    summed = published("gemini-2.5-pro", "google", input_tokens=300_000, output_tokens=26)
    assert summed > 2 * one
    firing = SimpleNamespace(
        agent_config={"provider": "gemini", "model": "gemini-2.5-pro"},
        workflow=SimpleNamespace(owner_id=1),
        workflow_id=1,
        generation=1,
        agent_node_id="1:agent:1",
    )
    entry = llm_usage_entry(firing, idempotency_key="k", kind="llm", outcome="ok", usage=result.message["usage"])
    assert entry.cost == pytest.approx(2 * one, abs=Decimal("0.000001"))
    assert entry.meta["price_source"].endswith("per call")


# --- 14. Anthropic cache breakpoints: a wide tool step still reads the cache -------------------------------------


def test_14_a_step_with_many_parallel_tool_results_still_reads_the_prefix_from_the_cache(anthropic_fake):
    # The prompt-caching guide: up to 4 breakpoints; the lookup walks back about 20 blocks from each. A step that
    # adds 25 calls and 25 results puts 50 blocks between the last breakpoint and the one before.
    from providers import ChatRequest, ChatUnifier
    from tests.fakes import Call, Text, Turn

    from .loop import MEMORY_TOOL, answer_calls, opening, store_and_load

    anthropic_fake.simulate_cache = True
    calls = [Call("memory", f'{{"operation": "recall", "query": "q{n}"}}') for n in range(25)]
    anthropic_fake.push(Turn(calls), Turn([Text("Done.")]))

    def step(messages):
        request = ChatRequest(
            provider="anthropic",
            model="claude-sonnet-4-5",
            messages=messages,
            tools=[MEMORY_TOOL],
            api_key="sk-ant-14",
            base_url=anthropic_fake.base_url,
        )
        return ChatUnifier().chat(request)

    first = step(opening())
    first_prefix, _, first_written = anthropic_fake.last_cache
    assert first_written == first_prefix  # a cold cache: the whole prompt written
    second = step(store_and_load([*opening(), first.message, *answer_calls(first.message)]))
    _, read, _ = anthropic_fake.last_cache
    assert read >= first_prefix  # everything the first step wrote is read back, not written again
    assert second.usage.cached_tokens == read
    breakpoints = json.dumps(anthropic_fake.last_body).count('"cache_control"')
    assert breakpoints <= 4
