"""Compaction (docs/invariants.md#compaction): summarize the turns before the latest one, activate by compare-and-swap.

The summarizer and the token counter are passed in by the provider layer, so this module never calls a provider
and is testable without one. Usage of the summarizer call is billed by the caller like any provider call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

from providers.wire import WireError, validate_messages

from .errors import CompactionError
from .keys import ConversationKey
from .loading import load_conversation_snapshot
from .locks import conversation_header_for_update
from .retained import retain_for_lease_holders
from .rows import write_locked
from .transcript import COMPACTION_SUMMARY_HEADER, latest_turn_start, stored_json

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionOutcome:
    status: str  # compacted | skipped | discarded | conflict
    reason: str
    tokens_before: int | None = None
    tokens_after: int | None = None
    message_count: int | None = None
    version: int | None = None

    @property
    def compacted(self) -> bool:
        return self.status == "compacted"


def should_compact(*, last_input_tokens: int, added_tokens: int, context_window_tokens: int, threshold: float) -> bool:
    """The projected next request (last request's input + what the turn added) reaches `threshold` of the window."""
    if context_window_tokens <= 0:
        return False
    return last_input_tokens + added_tokens >= threshold * context_window_tokens


def compaction_candidate(messages: list[dict], summary: str) -> list[dict]:
    """`[system (verbatim), user(summary header + summary), latest turn verbatim]`."""
    system_end = 0
    while system_end < len(messages) and messages[system_end].get("role") == "system":
        system_end += 1
    latest = latest_turn_start(messages)
    summary_message = {
        "role": "user",
        "blocks": [{"type": "text", "text": COMPACTION_SUMMARY_HEADER + summary}],
        "meta": {"compaction_summary": True},
    }
    return [*messages[:system_end], summary_message, *messages[latest:]]


def compaction_source(messages: list[dict]) -> list[dict]:
    """The turns the summary replaces: everything after the system messages and before the latest turn.

    The latest turn starts at a user message, and a user message never sits between an assistant's tool calls and
    their results, so this boundary never splits a call from its results.
    """
    system_end = 0
    while system_end < len(messages) and messages[system_end].get("role") == "system":
        system_end += 1
    latest = latest_turn_start(messages)
    return messages[system_end:latest] if latest > system_end else []


def compact_conversation(
    key: ConversationKey,
    *,
    summarize: Callable[[list[dict]], str],
    count_tokens: Callable[[list[dict]], int],
) -> CompactionOutcome:
    snapshot = load_conversation_snapshot(key)
    messages = snapshot.messages
    source = compaction_source(messages)
    if not source:
        return CompactionOutcome("skipped", "nothing older than the latest turn", message_count=len(messages))

    # The provider call happens outside any transaction: no row lock is ever held across it.
    try:
        summary = summarize(source)
    except Exception as exc:
        raise CompactionError(message=f"The summarizer failed: {exc}", extra=key.as_log()) from exc
    if not isinstance(summary, str) or not summary.strip():
        raise CompactionError(message="The summarizer returned no summary.", extra=key.as_log())

    candidate = compaction_candidate(messages, summary.strip())
    try:
        validate_messages(candidate)
        stored_json(candidate)
    except (WireError, TypeError, ValueError) as exc:
        return CompactionOutcome("discarded", f"candidate does not serialize: {exc}", message_count=len(messages))
    before, after = count_tokens(messages), count_tokens(candidate)
    if after >= before:
        return CompactionOutcome("discarded", "candidate is not smaller", before, after, len(messages))

    with transaction.atomic():
        header = conversation_header_for_update(key, create=False)
        # Compare-and-swap: the list summarized must still be the stored one, else a concurrent turn would be lost.
        if header is None or header[1] != snapshot.version:
            return CompactionOutcome("conflict", "the conversation changed meanwhile", before, after, len(messages))
        retain_for_lease_holders([header[0]])
        result = write_locked(key, header, candidate, reason="compaction")
    logger.info("conversation compacted", extra={**key.as_log(), "tokens_before": before, "tokens_after": after})
    return CompactionOutcome("compacted", "ok", before, after, result.message_count, result.version)
