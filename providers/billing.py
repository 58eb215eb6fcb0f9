"""What one provider call puts in the usage ledger: its real tokens, its cost from providers/pricing.py (None with
the reason when the model has no known price), cache writes and the price source in `meta`."""

from __future__ import annotations

from .catalogue import capabilities
from .errors import UnknownProviderError
from .pricing import call_cost, embedding_cost


def ledger_fields(*, provider: str, model: str, usage: dict | None) -> dict:
    """The tokens, cost and meta of a ledger entry (conversations.services.UsageEntry)."""
    usage = usage or {}
    tokens = {
        "input_tokens": int(usage.get("input_tokens", 0)),
        "cached_input_tokens": int(usage.get("cached_tokens", 0)),
        "output_tokens": int(usage.get("output_tokens", 0)),
        "reasoning_tokens": int(usage.get("reasoning_tokens", 0)),
    }
    written = int(usage.get("cache_creation_tokens", 0))
    meta: dict = {}
    if written:
        meta["cache_creation_input_tokens"] = written
    if usage.get("estimated"):
        meta["estimated"] = True
    try:
        caps = capabilities(provider, model)
    except UnknownProviderError:
        return {**tokens, "cost": None, "meta": {**meta, "price_note": f"unknown provider {provider!r}"}}
    price = call_cost(
        caps,
        input_tokens=tokens["input_tokens"],
        cached_tokens=tokens["cached_input_tokens"],
        output_tokens=tokens["output_tokens"],
        cache_creation_tokens=written,
    )
    if price is None:
        meta["price_note"] = caps.note or f"no price is known for {provider}/{model}"
        return {**tokens, "cost": None, "meta": meta}
    meta["price_source"] = price.source
    return {**tokens, "cost": price.amount, "meta": meta}


def embedding_ledger_fields(*, provider: str, model: str, input_tokens: int) -> dict:
    """Ledger fields for an embedding call (kind "embedding"), for the memory indexer to append."""
    price = embedding_cost(provider=provider, model=model, input_tokens=input_tokens)
    meta = {"price_source": price.source} if price else {"price_note": f"no price is known for {provider}/{model}"}
    return {"input_tokens": int(input_tokens), "cost": price.amount if price else None, "meta": meta}
