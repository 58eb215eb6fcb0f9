"""An MCP `tools/call` result as the text of a tool result: text blocks as text, structured content as JSON, images,
audio and resources as placeholders naming them (until the chat carries files), cut at the node's cap."""

from __future__ import annotations

import json


def _block_text(block) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind} {block.mime_type}, about {size} bytes, not shown]"
    if kind == "resource_link":
        return f"[resource link {block.uri}{' (' + block.name + ')' if getattr(block, 'name', '') else ''}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri}]\n{text}"
        return f"[resource {resource.uri}, {getattr(resource, 'mime_type', None) or 'binary'}, not shown]"
    return f"[{kind or 'unknown'} content, not shown]"


def result_text(result, *, max_chars: int) -> tuple[str, bool]:
    """(text, is_error) of a CallToolResult. Structured content comes first when there is no text block to say the
    same (the SDK's servers put its JSON in a text block too)."""
    parts = [_block_text(block) for block in result.content or []]
    structured = getattr(result, "structured_content", None)
    if structured is not None and not any(getattr(b, "type", "") == "text" for b in result.content or []):
        parts.insert(0, json.dumps(structured, ensure_ascii=False, default=str))
    text = "\n".join(p for p in parts if p) or ("(no content)" if not result.is_error else "(the tool failed)")
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[cut: the result had {len(text)} characters, this node keeps {max_chars}]"
    return text, bool(result.is_error)
