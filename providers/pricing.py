"""Prices of provider calls, from the pinned `genai-prices` package (a maintained dataset with tiers and cache
rates), falling back to a catalogue entry's `prices` only for models that dataset does not cover. A model neither
knows has no price: the call is billed with cost None and the reason, never at a made-up default."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

logger = logging.getLogger("providers")

# Our provider names -> genai-prices provider ids (openai_compatible servers are priced only from the catalogue).
PRICE_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}


@dataclass(frozen=True)
class Price:
    amount: Decimal
    source: str  # "genai-prices <version>" or "catalogue"


@lru_cache(maxsize=1)
def _dataset_version() -> str:
    from importlib.metadata import version

    return f"genai-prices {version('genai-prices')}"


def covered(provider: str, model: str) -> bool:
    """Whether genai-prices knows this model (for the catalogue page and the tests)."""
    price_provider = PRICE_PROVIDERS.get(provider)
    if price_provider is None:
        return False
    from genai_prices import data_snapshot

    try:
        data_snapshot.get_snapshot().find_provider_model(model.removeprefix("models/"), None, price_provider, None)
    except LookupError:
        return False
    return True


def call_cost(
    capabilities,
    *,
    input_tokens: int,
    cached_tokens: int = 0,
    output_tokens: int = 0,
    cache_creation_tokens: int = 0,
) -> Price | None:
    provider, model = capabilities.provider, capabilities.model.removeprefix("models/")
    price_provider = getattr(capabilities, "price_provider", None) or PRICE_PROVIDERS.get(provider)
    if price_provider is not None:
        from genai_prices import Usage, calc_price

        usage = {"input_tokens": max(0, int(input_tokens)), "output_tokens": max(0, int(output_tokens))}
        if cached_tokens:
            usage["cache_read_tokens"] = int(cached_tokens)
        if cache_creation_tokens:
            usage["cache_write_tokens"] = int(cache_creation_tokens)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = calc_price(Usage(**usage), model_ref=model, provider_id=price_provider)
            return Price(Decimal(result.total_price), _dataset_version())
        except LookupError:
            pass
    prices = capabilities.fallback_prices
    if not prices:
        return None
    uncached = max(int(input_tokens) - int(cached_tokens), 0)
    amount = (
        Decimal(str(prices.get("input_per_mtok", 0))) * uncached
        + Decimal(str(prices.get("cached_input_per_mtok", prices.get("input_per_mtok", 0)))) * int(cached_tokens)
        + Decimal(str(prices.get("output_per_mtok", 0))) * int(output_tokens)
    ) / Decimal(1_000_000)
    return Price(amount, "catalogue")


def embedding_cost(*, provider: str, model: str, input_tokens: int) -> Price | None:
    """Price of an embedding call (memory indexing and recall queries); None when the model has no known price."""
    price_provider = PRICE_PROVIDERS.get(provider)
    if price_provider is None:
        return None
    from genai_prices import Usage, calc_price

    try:
        result = calc_price(Usage(input_tokens=max(0, int(input_tokens))), model_ref=model, provider_id=price_provider)
    except LookupError:
        return None
    return Price(Decimal(result.total_price), _dataset_version())
