"""Active context pressure: how many input tokens the next request would carry."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from .errors import ProviderError
from .types import ChatRequest

logger = logging.getLogger("providers")

CHARS_PER_TOKEN = 4
COUNTING_PROVIDERS = ("openai", "anthropic", "gemini")  # providers with a free token-count endpoint
PER_MESSAGE_OVERHEAD = 4


def estimate_tokens(request: ChatRequest) -> int:
    """Local estimate, ~4 characters per token over everything the request would carry (blocks and tools)."""
    chars = 0
    for message in request.messages:
        for block in message.get("blocks", []):
            kind = block.get("type")
            if kind == "text" or kind == "thinking":
                chars += len(block.get("text", ""))
            elif kind == "tool_call":
                chars += len(block.get("name", "")) + len(block.get("arguments_raw", ""))
            elif kind == "tool_result":
                chars += len(block.get("content", ""))
            elif kind == "redacted_thinking":
                chars += len(block.get("data", "")) // 4
            elif kind == "image":
                chars += 1000 * CHARS_PER_TOKEN  # providers bill an image at roughly a thousand tokens
            else:
                chars += len(json.dumps(block))
        chars += PER_MESSAGE_OVERHEAD * CHARS_PER_TOKEN
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def measure_active_context(request: ChatRequest, *, use_endpoint: bool = True) -> int:
    """Input tokens of `request`: the provider's token-count endpoint where it has a free one (OpenAI
    input_tokens.count, Anthropic count_tokens, Gemini countTokens), else (or when that call fails) the estimate."""
    if use_endpoint and request.provider in ("openai", "anthropic", "gemini"):
        from .unifier import adapter_for

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
    from .catalogue import capabilities

    if request.provider == "anthropic":
        from .adapters.anthropic_messages import request_max_output

        return request_max_output(request)
    caps = capabilities(request.provider, request.model)
    return int(request.settings.max_output_tokens or caps.max_output_tokens)


def measure_pressure(request: ChatRequest) -> Pressure:
    """Active context pressure of `request`, counted by the provider where it has a counter. Makes a network call
    for those providers: never call it inside a transaction or a lock."""
    from .catalogue import capabilities

    method = "estimate"
    tokens = None
    if request.provider in COUNTING_PROVIDERS:
        from .unifier import adapter_for

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
