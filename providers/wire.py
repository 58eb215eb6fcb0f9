"""MessageWire: the one provider-neutral message format stored in conversations (providers/README.md#call-shape).

A stored conversation is a JSON list of message dicts. This module gives typed, validated views of those dicts.
The dict is the contract: ``MessageWire.from_dict(d).to_dict() == d`` for every valid ``d``, so a round trip through
these classes never changes what is stored. Unknown block types (written by a newer version) and unknown keys are
kept verbatim for the same reason.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

ROLES = ("system", "user", "assistant", "tool")


class WireError(ValueError):
    """A message list that is not valid MessageWire. The message names the offending message and block."""


class _Block(BaseModel):
    # extra="allow": keys added by a newer version survive a round trip instead of being dropped.
    model_config = ConfigDict(extra="allow", strict=True)
    block_type: ClassVar[str] = ""

    def to_dict(self) -> dict:
        return self.model_dump(exclude_unset=True, mode="python")


class TextBlock(_Block):
    block_type: ClassVar[str] = "text"
    type: Literal["text"]
    text: StrictStr
    stopped: StrictBool | None = None


class ToolCallBlock(_Block):
    block_type: ClassVar[str] = "tool_call"
    type: Literal["tool_call"]
    id: StrictStr
    name: StrictStr
    # The exact string the provider sent, malformed JSON included; `arguments` is its parse when it is an object.
    arguments_raw: StrictStr
    arguments: dict[str, Any] | None
    parse_error: StrictStr | None = None


class ToolResultBlock(_Block):
    block_type: ClassVar[str] = "tool_result"
    type: Literal["tool_result"]
    tool_call_id: StrictStr
    name: StrictStr
    content: StrictStr
    is_error: StrictBool


class ThinkingBlock(_Block):
    block_type: ClassVar[str] = "thinking"
    type: Literal["thinking"]
    text: StrictStr
    signature: StrictStr | None
    provider: StrictStr


class RedactedThinkingBlock(_Block):
    block_type: ClassVar[str] = "redacted_thinking"
    type: Literal["redacted_thinking"]
    data: StrictStr


class ImageBlock(_Block):
    block_type: ClassVar[str] = "image"
    type: Literal["image"]
    ref: StrictStr
    media_type: StrictStr | None = None


class FileBlock(_Block):
    """An attached file, by reference: the bytes live once in file storage under their SHA-256.

    Adapters turn it into the provider's documented form when they build a request, reading the bytes through
    ``providers.files.read_file_bytes``; the stored conversation never holds the bytes.
    """

    block_type: ClassVar[str] = "file"
    type: Literal["file"]
    sha256: StrictStr
    media_type: StrictStr
    name: StrictStr
    size: int


class UnknownBlock:
    """A block whose type this version does not know; kept byte-for-byte so a newer writer loses nothing."""

    def __init__(self, data: dict):
        self.data = data
        self.type = data["type"]

    def to_dict(self) -> dict:
        return self.data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownBlock) and other.data == self.data

    def __repr__(self) -> str:
        return f"UnknownBlock({self.data!r})"


Block = (
    TextBlock
    | ToolCallBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ImageBlock
    | FileBlock
    | UnknownBlock
)

BLOCK_CLASSES: dict[str, type[_Block]] = {
    cls.block_type: cls
    for cls in (TextBlock, ToolCallBlock, ToolResultBlock, ThinkingBlock, RedactedThinkingBlock, ImageBlock, FileBlock)
}


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "value"
    return f"{where}: {err['msg']}"


def block_from_dict(data: Any) -> Block:
    if not isinstance(data, dict):
        raise WireError(f"a block must be an object, got {type(data).__name__}")
    kind = data.get("type")
    if not isinstance(kind, str) or not kind:
        raise WireError("a block needs a non-empty string 'type'")
    cls = BLOCK_CLASSES.get(kind)
    if cls is None:
        return UnknownBlock(data)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise WireError(f"invalid {kind} block: {_first_error(exc)}") from None


class MessageWire(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, arbitrary_types_allowed=True)

    role: Literal["system", "user", "assistant", "tool"]
    blocks: list[Any]
    provider_state: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    ts: StrictStr | None = None
    meta: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Any) -> MessageWire:
        if not isinstance(data, dict):
            raise WireError(f"a message must be an object, got {type(data).__name__}")
        if not isinstance(data.get("blocks"), list):
            raise WireError("a message needs a 'blocks' list")
        blocks = [block_from_dict(b) for b in data["blocks"]]
        try:
            message = cls.model_validate({**data, "blocks": []})
        except ValidationError as exc:
            raise WireError(f"invalid message: {_first_error(exc)}") from None
        message.blocks = blocks
        return message

    def to_dict(self) -> dict:
        out = self.model_dump(exclude_unset=True, exclude={"blocks"}, mode="python")
        result = {"role": out.pop("role"), "blocks": [b.to_dict() for b in self.blocks]}
        result.update(out)
        return result


# --- constructors used by adapters and callers; they build dicts, the stored form ---


def text_block(text: str, *, stopped: bool = False) -> dict:
    block = {"type": "text", "text": text}
    if stopped:
        block["stopped"] = True
    return block


def tool_call_block(*, id: str, name: str, arguments_raw: str) -> dict:
    """Parse `arguments_raw` once, here, so every adapter agrees on what counts as malformed."""
    block: dict[str, Any] = {"type": "tool_call", "id": id, "name": name, "arguments_raw": arguments_raw}
    try:
        parsed = json.loads(arguments_raw) if arguments_raw.strip() else {}
    except ValueError as exc:
        block["arguments"] = None
        block["parse_error"] = f"invalid JSON: {exc}"
        return block
    if isinstance(parsed, dict):
        block["arguments"] = parsed
    else:
        block["arguments"] = None
        block["parse_error"] = f"arguments must be a JSON object, got {type(parsed).__name__}"
    return block


def tool_result_message(*, tool_call_id: str, name: str, content: str, is_error: bool = False) -> dict:
    return {
        "role": "tool",
        "blocks": [
            {
                "type": "tool_result",
                "tool_call_id": tool_call_id,
                "name": name,
                "content": content,
                "is_error": is_error,
            }
        ],
    }


def text_message(role: str, text: str) -> dict:
    return {"role": role, "blocks": [text_block(text)]}


# --- helpers over dicts ---


def text_of(message: dict) -> str:
    """The message's visible text: its text blocks joined (thinking is not visible text)."""
    return "".join(b.get("text", "") for b in message.get("blocks", []) if b.get("type") == "text")


def tool_calls_of(message: dict) -> list[dict]:
    return [b for b in message.get("blocks", []) if b.get("type") == "tool_call"]


def tool_results_of(message: dict) -> list[dict]:
    return [b for b in message.get("blocks", []) if b.get("type") == "tool_result"]


_ROLE_BLOCKS = {
    "tool_call": ("assistant",),
    "tool_result": ("tool",),
    "thinking": ("assistant",),
    "redacted_thinking": ("assistant",),
}


def validate_messages(messages: Any) -> list[MessageWire]:
    """Validate a whole conversation: each message's shape, which roles may hold which blocks, and that every
    tool result answers a call of the assistant message it follows. Raises WireError naming the first problem."""
    if not isinstance(messages, list):
        raise WireError(f"messages must be a list, got {type(messages).__name__}")
    parsed: list[MessageWire] = []
    open_calls: dict[str, str] = {}  # call id -> name, for the latest assistant message
    for index, raw in enumerate(messages):
        try:
            message = MessageWire.from_dict(raw)
        except WireError as exc:
            raise WireError(f"messages[{index}]: {exc}") from None
        for block_index, block in enumerate(message.blocks):
            allowed = _ROLE_BLOCKS.get(block.type)
            if allowed and message.role not in allowed:
                where = f"messages[{index}].blocks[{block_index}]"
                raise WireError(f"{where}: a {block.type} block cannot be in a {message.role} message")
        if message.role == "assistant":
            open_calls = {}
            for block in message.blocks:
                if block.type == "tool_call":
                    if block.id in open_calls:
                        raise WireError(f"messages[{index}]: duplicate tool call id {block.id!r}")
                    open_calls[block.id] = block.name
        elif message.role == "tool":
            results = [b for b in message.blocks if b.type == "tool_result"]
            if len(results) != 1 or len(message.blocks) != 1:
                raise WireError(f"messages[{index}]: a tool message holds exactly one tool_result block")
            call_id = results[0].tool_call_id
            if call_id not in open_calls:
                raise WireError(
                    f"messages[{index}]: tool_result for {call_id!r} does not answer a tool call of the preceding "
                    "assistant message"
                )
        else:
            open_calls = {}
        parsed.append(message)
    return parsed
