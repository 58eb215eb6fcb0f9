"""Model capabilities per family (catalogue.json) and prices (providers/pricing.py, from genai-prices).

A model is matched to the longest family prefix of its provider; a name no prefix matches gets the provider's `*`
entry: conservative knobs, no price, and `note` saying it is an unknown model, so a page can show it instead of
billing a silent default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import config
from .errors import UnknownProviderError
from .pricing import call_cost
from .types import PROVIDERS

CATALOGUE_PATH = Path(__file__).with_name("catalogue.json")
UNKNOWN_MODEL_NOTE = (
    "unknown model: not in the catalogue, so conservative capabilities are assumed and no price is known "
    "(its calls are billed without a cost)"
)


@dataclass(frozen=True)
class Capabilities:
    provider: str
    model: str
    family: str
    context_window: int
    max_output_tokens: int
    reasoning: bool  # the model can reason (OpenAI: request encrypted reasoning for it)
    thinking: str  # how the thinking knob is sent: none | effort | budget | adaptive | adaptive_only | level
    thinking_off: Any  # what "off" becomes (see providers/README.md), None when it cannot be turned off
    temperature: bool  # the model accepts a temperature
    replay_reasoning: bool  # openai_compatible: the server needs reasoning_content back
    alternate_roles: bool  # openai_compatible: the chat template needs user/assistant alternation
    known: bool
    note: str = ""
    effort_levels: tuple[str, ...] = ()
    thinking_budgets: dict = field(default_factory=dict)
    fallback_prices: dict | None = None  # catalogue prices, used only where genai-prices has no entry
    # The genai-prices provider that prices this family when it is not the provider's own (DeepSeek's API behind
    # openai_compatible): None = the provider's.
    price_provider: str | None = None
    # Gemini 3 and later: Google recommends the default temperature (1.0; lower values can make the model loop), so
    # an owner's temperature is sent only when they confirmed it (ChatSettings.temperature_confirmed).
    temperature_confirm: bool = False
    # Attached files (providers/README.md#files): the model takes images / documents (PDF, text files) natively;
    # otherwise documents go as their extracted text and images as a line naming them.
    images: bool = False
    documents: bool = False

    def cost(
        self, *, input_tokens: int, cached_tokens: int = 0, output_tokens: int = 0, cache_creation_tokens: int = 0
    ) -> float | None:
        """USD for one call, or None when no price is known. `input_tokens` includes cached and cache-written
        input; reasoning is part of output."""

        priced = call_cost(
            self,
            input_tokens=input_tokens,
            cached_tokens=cached_tokens,
            output_tokens=output_tokens,
            cache_creation_tokens=cache_creation_tokens,
        )
        return None if priced is None else float(priced.amount)


@lru_cache(maxsize=4)
def _read(path: str) -> dict:
    return json.loads(Path(path).read_text())


def catalogue_data() -> dict:
    """The whole model catalogue: per provider, its model families and their numbers (cached per file)."""
    # PROVIDER_CATALOGUE_PATH lets a deployment ship its own families without a code change.
    return _read(str(config.setting("PROVIDER_CATALOGUE_PATH") or CATALOGUE_PATH))


def catalogue_entries(provider: str) -> dict[str, dict]:
    return {name: entry for name, entry in catalogue_data().get(provider, {}).items() if name != "*"}


def capabilities(provider: str, model: str) -> Capabilities:
    if provider not in PROVIDERS:
        raise UnknownProviderError(f"unknown provider {provider!r}", provider=provider)
    entries = catalogue_data().get(provider, {})
    bare = model.removeprefix("models/")  # Gemini accepts both spellings
    # Dated snapshots ("gpt-4.1-2025-04-14") share their family's numbers: longest matching prefix wins.
    prefixes = sorted((name for name in entries if name != "*" and bare.startswith(name)), key=len, reverse=True)
    entry = entries[prefixes[0]] if prefixes else entries["*"]
    known = bool(prefixes) or bool(entry.get("known"))
    return Capabilities(
        provider=provider,
        model=model,
        family=str(entry.get("family", "unknown")),
        context_window=int(entry["context_window"]),
        max_output_tokens=int(entry["max_output_tokens"]),
        reasoning=bool(entry.get("reasoning", False)),
        thinking=str(entry.get("thinking", "none")),
        thinking_off=entry.get("thinking_off", entry.get("effort_off")),
        temperature=bool(entry.get("temperature", True)),
        replay_reasoning=bool(entry.get("replay_reasoning", False)),
        alternate_roles=bool(entry.get("alternate_roles", False)),
        known=known,
        note="" if known else UNKNOWN_MODEL_NOTE,
        effort_levels=tuple(entry.get("effort_levels") or ()),
        thinking_budgets=dict(entry.get("thinking_budgets") or {}),
        fallback_prices=entry.get("prices"),
        price_provider=entry.get("price_provider"),
        temperature_confirm=bool(entry.get("temperature_confirm", False)),
        images=bool(entry.get("images", False)),
        documents=bool(entry.get("documents", False)),
    )
