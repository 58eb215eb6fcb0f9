"""Active context pressure: how many input tokens the next request would carry."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .catalogue import capabilities
from .errors import ProviderError
from .token_estimate import CHARS_PER_TOKEN, estimate_tokens
from .types import ChatRequest
from .unifier import adapter_for

logger = logging.getLogger("providers")

COUNTING_PROVIDERS = ("openai", "anthropic", "gemini")  # providers with a free token-count endpoint


def measure_active_context(request: ChatRequest, *, use_endpoint: bool = True) -> int:
    """Input tokens of `request`: the provider's token-count endpoint where it has a free one (OpenAI
    input_tokens.count, Anthropic count_tokens, Gemini countTokens), else (or when that call fails) the estimate."""
    if use_endpoint and request.provider in ("openai", "anthropic", "gemini"):
        try:
            return adapter_for(request.provider).count_input_tokens(request)
        except ProviderError as exc:
            logger.info("token count endpoint failed for %s (%s); using the estimate", request.provider, exc.code)
    return estimate_tokens(request)


@dataclass(frozen=True)
class Pressure:
    input_tokens: int  # what the next request carries
    output_headroom_tokens: int  # the output that request will actually allow
    context_window_tokens: int
    # "provider_count": the provider's own token counter; "estimate": ~4 characters per token, because the provider
    # has no counter (offline, OpenAI-compatible servers) or its counter failed just now.
    method: str


def output_headroom(request: ChatRequest) -> int:
    """The output the request will allow: the max_output_tokens it sends, else what the provider applies without
    one (the model's maximum, or for Anthropic, which needs a value, the adapter's default)."""
    if request.provider == "anthropic":
        # Imported on use, like every adapter (providers/unifier.py): the offline default must not import the SDK.
        from .adapters.anthropic_messages import request_max_output

        return request_max_output(request)
    caps = capabilities(request.provider, request.model)
    return int(request.settings.max_output_tokens or caps.max_output_tokens)


def measure_pressure(request: ChatRequest) -> Pressure:
    """Active context pressure of `request`, counted by the provider where it has a counter. Makes a network call
    for those providers: never call it inside a transaction or a lock."""
    method = "estimate"
    tokens = None
    if request.provider in COUNTING_PROVIDERS:
        try:
            tokens = adapter_for(request.provider).count_input_tokens(request)
            method = "provider_count"
        except ProviderError as exc:
            logger.info("token count endpoint failed for %s (%s); using the estimate", request.provider, exc.code)
    if tokens is None:
        tokens = estimate_tokens(request)
    window = capabilities(request.provider, request.model).context_window
    headroom = min(output_headroom(request), max(window - tokens, 0))
    return Pressure(tokens, headroom, window, method)


PROVIDER_NAMES = {"openai": "OpenAI", "anthropic": "Anthropic", "gemini": "Gemini"}


def pressure_method_note(provider: str) -> str:
    """How the pressure of an agent on `provider` is measured, for the Context panel."""
    if provider in COUNTING_PROVIDERS:
        return (
            f"Counted by {PROVIDER_NAMES[provider]}'s own token counter after each step (estimated at about "
            f"{CHARS_PER_TOKEN} characters per token when the counter could not be reached)."
        )
    return f"Estimated at about {CHARS_PER_TOKEN} characters per token: this provider has no token counter."
