"""Billing at the edges (issue 30 #10-#14): every price here is computed in the test straight from `genai-prices`
(the maintained price data), never from the adapters' or the ledger's arithmetic."""

from __future__ import annotations

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
