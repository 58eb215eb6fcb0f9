"""Model capabilities and prices, from catalogue.json (a data file so prices can change without code)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import config
from .errors import UnknownProviderError
from .types import PROVIDERS

CATALOGUE_PATH = Path(__file__).with_name("catalogue.json")


@dataclass(frozen=True)
class Capabilities:
    provider: str
    model: str
    context_window: int
    max_output_tokens: int
    input_per_mtok: float
    cached_input_per_mtok: float
    output_per_mtok: float
    reasoning: bool
    replay_reasoning: bool
    known: bool  # False when the provider's "*" fallback entry answered

    def cost(self, *, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        """USD for one call; cached input is billed at its own rate, reasoning is part of output."""
        uncached = max(input_tokens - cached_tokens, 0)
        return (
            uncached * self.input_per_mtok
            + cached_tokens * self.cached_input_per_mtok
            + output_tokens * self.output_per_mtok
        ) / 1_000_000


@lru_cache(maxsize=4)
def _read(path: str) -> dict:
    return json.loads(Path(path).read_text())


def _load() -> dict:
    # PROVIDER_CATALOGUE_PATH lets a deployment ship its own prices and models without a code change.
    return _read(str(config.setting("PROVIDER_CATALOGUE_PATH") or CATALOGUE_PATH))


def capabilities(provider: str, model: str) -> Capabilities:
    if provider not in PROVIDERS:
        raise UnknownProviderError(f"unknown provider {provider!r}", provider=provider)
    entries = _load().get(provider, {})
    entry = entries.get(model)
    known = entry is not None
    if entry is None:
        # Dated snapshots ("gpt-4.1-2025-04-14") share their family's numbers: longest matching prefix wins.
        prefixes = sorted((name for name in entries if name != "*" and model.startswith(name)), key=len, reverse=True)
        entry = entries[prefixes[0]] if prefixes else entries["*"]
        known = bool(prefixes)
    return Capabilities(
        provider=provider,
        model=model,
        context_window=int(entry["context_window"]),
        max_output_tokens=int(entry["max_output_tokens"]),
        input_per_mtok=float(entry["input_per_mtok"]),
        cached_input_per_mtok=float(entry["cached_input_per_mtok"]),
        output_per_mtok=float(entry["output_per_mtok"]),
        reasoning=bool(entry.get("reasoning", False)),
        replay_reasoning=bool(entry.get("replay_reasoning", provider != "openai_compatible")),
        known=known,
    )
