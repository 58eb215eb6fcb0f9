"""Pure functions over message lists (MessageWire dicts): hashing, cursors, seeding, repair, caps and clearing.

None of these touch the database, and none mutates its input: a changed message is a new dict, so a list the
caller is about to send is never altered behind its back (docs/invariants.md#store-observes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable

from django.conf import settings

from providers.wire import text_message, tool_result_message

_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_stored = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

NOT_COMPLETED = (
    "Not completed: this tool call was interrupted before it returned a result (the run stopped or crashed). "
    "Call the tool again if you still need it."
)
CLEARED_PLACEHOLDER = (
    "[Earlier tool result cleared to keep the conversation within its size budget. Call the tool again if you "
    "need this information.]"
)
COMPACTION_SUMMARY_HEADER = "## Compacted conversation summary\n"


def without_ts(message: dict) -> dict:
    if "ts" not in message:
        return message
    return {k: v for k, v in message.items() if k != "ts"}


def canonical_json(message: dict) -> str:
    """The message as hashed: sorted keys, no `ts` (view-only, so it never makes two messages differ)."""
    return _canonical.encode(without_ts(message))


def stored_json(message: dict) -> str:
    return _stored.encode(message)


def message_hash(message: dict) -> bytes:
    return hashlib.blake2b(canonical_json(message).encode(), digest_size=16).digest()


EMPTY_CHAIN = hashlib.blake2b(b"", digest_size=16).digest()


def chain_hash(previous: bytes, message_digest: bytes) -> bytes:
    """The digest of a list is chained message by message, so every stored row carries the digest of the prefix
    ending at it: checking that a stored conversation still starts as a cursor says reads one row."""
    return hashlib.blake2b(previous + message_digest, digest_size=16).digest()


def chain_of(hashes: Iterable[bytes], previous: bytes = EMPTY_CHAIN) -> list[bytes]:
    chains = []
    for digest in hashes:
        previous = chain_hash(previous, digest)
        chains.append(previous)
    return chains


def conversation_digest(messages: list[dict]) -> str:
    chains = chain_of(message_hash(m) for m in messages)
    return (chains[-1] if chains else EMPTY_CHAIN).hex()


def conversation_cursor(messages: list[dict]) -> dict:
    """Where a conversation stood: its length and a digest over its messages without `ts` (chat branch moves)."""
    return {"length": len(messages), "digest": conversation_digest(messages)}


def starts_with(messages: list[dict], cursor: dict) -> bool:
    length = int(cursor["length"])
    if length > len(messages):
        return False
    return conversation_digest(messages[:length]) == cursor["digest"]


def _role(message: dict) -> str | None:
    return message.get("role") if isinstance(message, dict) else None


def _tool_calls(message: dict) -> list[dict]:
    return [b for b in message.get("blocks", []) if isinstance(b, dict) and b.get("type") == "tool_call"]


def _tool_result(message: dict) -> dict | None:
    for block in message.get("blocks", []):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return block
    return None


def close_unanswered_tool_calls(messages: list[dict]) -> list[dict]:
    """Answer every tool call of the latest assistant message that has no result (a crash, a cancel).

    Providers reject a request whose tool calls are unanswered, so a freshly loaded row gets one error result per
    open call, in call order, after the results that exist. A closed conversation is returned as is (same list).
    """
    last_assistant = next((i for i in range(len(messages) - 1, -1, -1) if _role(messages[i]) == "assistant"), None)
    if last_assistant is None:
        return messages
    calls = _tool_calls(messages[last_assistant])
    if not calls:
        return messages
    end = last_assistant + 1
    answered = set()
    while end < len(messages) and _role(messages[end]) == "tool":
        result = _tool_result(messages[end])
        if result is not None:
            answered.add(result.get("tool_call_id"))
        end += 1
    missing = [call for call in calls if call.get("id") not in answered]
    if not missing:
        return messages
    closing = []
    for call in missing:
        message = tool_result_message(
            tool_call_id=call["id"], name=call.get("name", ""), content=NOT_COMPLETED, is_error=True
        )
        message["meta"] = {"closed_on_load": True}
        closing.append(message)
    return [*messages[:end], *closing, *messages[end:]]


def seed_request(system_prompt: str | dict | None, stored: list[dict], user_prompt: str | dict | None) -> list[dict]:
    """A firing's initial list (docs/invariants.md#seeding): this firing's system prompt, the stored messages minus
    stored
    system messages (so a changed prompt takes effect), this firing's user prompt last."""
    head: list[dict] = []
    if isinstance(system_prompt, dict):
        head.append(system_prompt)
    elif system_prompt:
        head.append(text_message("system", system_prompt))
    body = [m for m in stored if _role(m) != "system"]
    tail: list[dict] = []
    if isinstance(user_prompt, dict):
        tail.append(user_prompt)
    elif user_prompt is not None:
        tail.append(text_message("user", user_prompt))
    return [*head, *body, *tail]


def truncation_note(original_chars: int, kept_chars: int) -> str:
    return (
        f"\n\n[Result truncated: it had {original_chars} characters and only the first {kept_chars} are shown. "
        "Call the tool again with narrower parameters (a filter, a smaller range or a lower limit) to see the rest.]"
    )


def cap_tool_result(content: str, limit: int | None = None, *, teammate: bool = False) -> str:
    """Cut a tool result to `limit` characters (default TOOL_RESULT_MAX_CHARS) plus a note to the model.

    A teammate's answer is never cut (`teammate=True`): it is the work the lead delegated, not raw data.
    """
    if teammate:
        return content
    limit = settings.TOOL_RESULT_MAX_CHARS if limit is None else min(limit, settings.TOOL_RESULT_MAX_CHARS)
    if len(content) <= limit:
        return content
    return content[:limit] + truncation_note(len(content), limit)


def is_compaction_summary(message: dict) -> bool:
    meta = message.get("meta") if isinstance(message, dict) else None
    return _role(message) == "user" and isinstance(meta, dict) and bool(meta.get("compaction_summary"))


def latest_turn_start(messages: list[dict]) -> int:
    """Index of the user message that opened the latest turn (a compaction summary does not open a turn)."""
    for index in range(len(messages) - 1, -1, -1):
        if _role(messages[index]) == "user" and not is_compaction_summary(messages[index]):
            return index
    return 0


def message_size(message: dict) -> int:
    return len(stored_json(message).encode())


def _cleared(message: dict, result: dict) -> dict:
    cleared = {
        "role": "tool",
        "blocks": [
            {
                "type": "tool_result",
                "tool_call_id": result.get("tool_call_id", ""),
                "name": result.get("name", ""),
                "content": CLEARED_PLACEHOLDER,
                "is_error": bool(result.get("is_error", False)),
            }
        ],
        "meta": {**(message.get("meta") or {}), "cleared": True},
    }
    if "ts" in message:
        cleared["ts"] = message["ts"]
    return cleared


def clear_old_tool_results(
    messages: list[dict],
    budget_bytes: int | None = None,
    *,
    teammate_tools: Collection[str] = (),
    sizes: list[int] | None = None,
) -> list[dict]:
    """Past `budget_bytes`, replace results of earlier turns by a short placeholder down to half the budget.

    Oldest first and external tools before teammate answers; each placeholder keeps its `tool_call_id` and name
    so every call still has an answer. The latest turn is never cleared. Returns the same list when under budget.
    `sizes`: each message's stored size when the caller has them (the store keeps them per row), so the list is not
    serialized again to measure it.
    """
    budget = settings.CONVERSATION_TOOL_RESULT_BUDGET_BYTES if budget_bytes is None else budget_bytes
    if sizes is None or len(sizes) != len(messages):
        sizes = [message_size(m) for m in messages]
    total = sum(sizes)
    if total <= budget:
        return messages
    target = budget // 2
    boundary = latest_turn_start(messages)
    candidates = []
    for index in range(boundary):
        message = messages[index]
        result = _tool_result(message) if _role(message) == "tool" else None
        meta = message.get("meta") or {}
        if result is None or meta.get("cleared"):
            continue
        candidates.append((result.get("name") in teammate_tools, index, result))
    candidates.sort(key=lambda item: (item[0], item[1]))
    out = list(messages)
    for _, index, result in candidates:
        if total <= target:
            break
        replacement = _cleared(messages[index], result)
        new_size = message_size(replacement)
        if new_size >= sizes[index]:
            continue
        out[index] = replacement
        total -= sizes[index] - new_size
    return out
