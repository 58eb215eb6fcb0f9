"""Active context pressure: how many input tokens the next request would carry."""

from __future__ import annotations

import json
import logging

from .errors import ProviderError
from .types import ChatRequest

logger = logging.getLogger("providers")

CHARS_PER_TOKEN = 4
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
