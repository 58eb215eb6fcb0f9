"""The local token estimate: about four characters per token over everything a request carries.

Below the adapters (which use it for a stopped stream's usage) and the context pressure (which falls back to it).
"""

from __future__ import annotations

import json

from .attachments import file_tokens
from .types import ChatRequest

CHARS_PER_TOKEN = 4
PER_MESSAGE_OVERHEAD = 4


def estimate_tokens(request: ChatRequest) -> int:
    """Local estimate, ~4 characters per token over everything the request would carry (blocks and tools); an
    attached file by its provider's documented rule for images and PDF pages."""
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
            elif kind == "file":
                # By the provider's documented rule for images and PDF pages (providers/attachments.py).
                tokens = file_tokens(block, provider=request.provider, model=request.model)
                chars += tokens * CHARS_PER_TOKEN
            else:
                chars += len(json.dumps(block))
        chars += PER_MESSAGE_OVERHEAD * CHARS_PER_TOKEN
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
