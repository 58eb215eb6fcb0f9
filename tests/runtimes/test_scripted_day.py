"""One scripted day across all eight runtimes (the four native adapters, Claude Code, Codex, the Vertex agent and RLM),
each firing run for real against its fake, and the day's ledger compared, to the cent, with a price table computed
here straight from `genai-prices` (issue 30): never from the adapters' or the ledger's arithmetic."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.models import UsageRecord
from tests.agents.factories import assistant_with
from tests.fakes import FakeChatCompletions, FakeGemini
from tests.fakes.base import Text, Turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
CENT = Decimal("0.01")


def published(model: str, provider_id: str, *calls: dict) -> Decimal:
    """The published price of these calls, each priced on its own (as the provider bills each request)."""
    total = Decimal(0)
    for call in calls:
        usage = PriceUsage(
            input_tokens=call["input"],
            cache_read_tokens=call.get("read") or None,
            cache_write_tokens=call.get("written") or None,
            output_tokens=call["output"],
        )
        total += Decimal(calc_price(usage, model_ref=model, provider_id=provider_id).total_price)
    return total


def _fire(workflow, generation, agent, prompt) -> None:
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt)
    )
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)


def _cell(code: str, **usage) -> Turn:
    return Turn([Text(f"```repl\n{code}\n```")], **usage)


@pytest.fixture
def gemini_fake(monkeypatch):
    with FakeGemini() as fake:
        monkeypatch.setenv("GEMINI_BASE_URL", fake.base_url)
        monkeypatch.setenv("GEMINI_API_KEY", "AIza-scripted-day")
        yield fake


@pytest.fixture
def compat_fake(monkeypatch):
    with FakeChatCompletions() as fake:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-scripted-day")
        yield fake


def test_one_scripted_day_across_all_eight_runtimes_is_billed_to_the_cent(
    owner, openai_fake, anthropic_fake, gemini_fake, compat_fake, vertex_fake
):
    big = {"input_tokens": 150_000, "cached_tokens": 30_000, "output_tokens": 4_000, "reasoning_tokens": 1_000}
    day = [
        # (provider, model, agent params, scripted replies, the fake that answers)
        ("openai", "gpt-5.5", {}, [Turn([Text("native openai")], cache_creation_tokens=20_000, **big)], openai_fake),
        (
            "anthropic",
            "claude-sonnet-4-5",
            {},
            [Turn([Text("native anthropic")], cache_creation_tokens=20_000, **big)],
            anthropic_fake,
        ),
        ("gemini", "gemini-2.5-pro", {}, [Turn([Text("native gemini")], **big)], gemini_fake),
        ("openai_compatible", "deepseek-v4-flash", {}, [Turn([Text("deepseek")], **big)], compat_fake),
        ("claude_code", "claude-sonnet-4-5", {}, [Turn([Text("claude code")], **big)], anthropic_fake),
        ("codex_cli", "gpt-5.5", {}, [Turn([Text("codex")], cache_creation_tokens=20_000, **big)], openai_fake),
        (
            "vertex_agent",
            "gemini-3-flash",
            {"project": "P", "location": "L", "agent": "antigravity-preview-05-2026", "environment": "remote"},
            [Turn([Text("vertex")], **big)],
            vertex_fake,
        ),
        (
            "rlm",
            "gpt-5.5",
            {},
            [_cell("print(2 + 2)", **big), _cell("answer['content'] = '4'\nanswer['ready'] = True", **big)],
            openai_fake,
        ),
    ]
    for provider, model, params, replies, fake in day:
        workflow, generation, ids = assistant_with(owner, provider=provider, model=model, **params)
        fake.push(*replies)
        _fire(workflow, generation, ids["lead"], f"a day's work for {provider}")

    one = {"input": 150_000, "read": 30_000, "output": 4_000}
    written = {**one, "written": 20_000}
    table = {
        "openai": published("gpt-5.5", "openai", written),
        "anthropic": published("claude-sonnet-4-5", "anthropic", written),
        "gemini": published("gemini-2.5-pro", "google", one),
        "openai_compatible": published("deepseek-v4-flash", "deepseek", one),
        "claude_code": published("claude-sonnet-4-5", "anthropic", one),
        "codex_cli": published("gpt-5.5", "openai", written),
        "vertex_agent": None,  # Google picks the agent's model: no price, never a guess
        "rlm": published("gpt-5.5", "openai", one, one),  # two backend calls, each priced on its own
    }
    rows = {row.provider: row for row in UsageRecord.objects.filter(owner_id=owner.pk, kind="llm")}
    assert set(rows) == set(table)
    ledger = {
        provider: None if row.cost is None else row.cost.quantize(CENT, ROUND_HALF_UP) for provider, row in rows.items()
    }
    expected = {
        provider: None if cost is None else cost.quantize(CENT, ROUND_HALF_UP) for provider, cost in table.items()
    }
    assert ledger == expected
    day_total = sum(row.cost for row in rows.values() if row.cost is not None)
    assert day_total.quantize(CENT, ROUND_HALF_UP) == sum(c for c in table.values() if c is not None).quantize(
        CENT, ROUND_HALF_UP
    )
    assert rows["vertex_agent"].cost is None and rows["vertex_agent"].meta["price_note"]  # and says why
    assert all(cost > CENT for cost in expected.values() if cost is not None)  # cents that matter, not rounding
