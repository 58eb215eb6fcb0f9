"""Compaction (docs/invariants.md#compaction): summarize the turns before the latest one, and land the summary on
whatever the stored list has become, as long as the summarised prefix is unchanged.

A compaction is two halves with a provider call between them, made outside any lock: `compaction_snapshot` reads
the list and names the prefix to summarise by its identity (`PrefixIdentity`); `compaction_land_locked` checks
that identity under the header's lock and writes `[system, user(summary), everything after the prefix, verbatim]`.
Turns appended after the snapshot are kept, so a conversation that never pauses is still compacted; only a change
inside the prefix (an edit, try again or a branch switch that rewrote it, Clear) discards the summary.

The summarizer and the token counter are passed in by the provider layer, so this module never calls a provider
and is testable without one. Usage of the summarizer call is billed by the caller like any provider call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection, transaction

from providers.wire import WireError, validate_messages

from .errors import CompactionError
from .keys import ConversationKey
from .loading import load_conversation_snapshot
from .locks import conversation_header_for_update
from .results import HEADER, ROWS, StoredPrefix
from .retained import retain_for_lease_holders
from .rows import write_locked
from .transcript import (
    COMPACTION_SUMMARY_HEADER,
    chain_of,
    is_compaction_summary,
    latest_turn_start,
    message_hash,
    stored_json,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionOutcome:
    status: str  # compacted | skipped | discarded
    reason: str
    tokens_before: int | None = None
    tokens_after: int | None = None
    message_count: int | None = None
    version: int | None = None
    # The stored list the compaction replaced and the one it wrote: a firing that extended the first extends the
    # second (its unsaved messages follow the kept turns just as they followed the old list).
    replaced: StoredPrefix | None = None
    written: StoredPrefix | None = None

    @property
    def compacted(self) -> bool:
        return self.status == "compacted"


@dataclass(frozen=True)
class PrefixIdentity:
    """Which stored prefix a summary replaces: the header row it belongs to (a Clear deletes the header, so a new
    conversation never matches), its length, and the chain digest at its last message (the blake2b chain over the
    messages' hashes the store keeps per row: equal chains mean the same messages, in the same order)."""

    conversation_id: int
    length: int
    chain: str


@dataclass(frozen=True)
class CompactionSnapshot:
    messages: list[dict]
    source: list[dict]  # what the summary replaces: the turns after the system messages, before the latest turn
    identity: PrefixIdentity | None


def should_compact(*, last_input_tokens: int, added_tokens: int, context_window_tokens: int, threshold: float) -> bool:
    """The projected next request (last request's input + what the turn added) reaches `threshold` of the window."""
    if context_window_tokens <= 0:
        return False
    return last_input_tokens + added_tokens >= threshold * context_window_tokens


def _system_end(messages: list[dict]) -> int:
    end = 0
    while end < len(messages) and messages[end].get("role") == "system":
        end += 1
    return end


def summary_message(summary: str) -> dict:
    return {
        "role": "user",
        "blocks": [{"type": "text", "text": COMPACTION_SUMMARY_HEADER + summary}],
        "meta": {"compaction_summary": True},
    }


def compaction_activation(messages: list[dict], prefix_length: int, summary: str) -> list[dict]:
    """`[system (verbatim), user(summary header + summary), messages[prefix_length:] verbatim]`: the list a summary
    of `messages[system:prefix_length]` lands as, whatever was appended after the prefix."""
    return [*messages[: _system_end(messages)], summary_message(summary), *messages[prefix_length:]]


def compaction_candidate(messages: list[dict], summary: str) -> list[dict]:
    """`[system (verbatim), user(summary header + summary), latest turn verbatim]`."""
    return compaction_activation(messages, latest_turn_start(messages), summary)


def compaction_source(messages: list[dict]) -> list[dict]:
    """The turns the summary replaces: everything after the system messages and before the latest turn.

    The latest turn starts at a user message, and a user message never sits between an assistant's tool calls and
    their results, so this boundary never splits a call from its results.
    """
    system_end = _system_end(messages)
    latest = latest_turn_start(messages)
    source = messages[system_end:latest] if latest > system_end else []
    # Only an earlier summary before the latest turn: summarising it again would pay for a call that cannot make the
    # list smaller (a list still over its threshold is then its latest turn, which is never summarised).
    return [] if all(is_compaction_summary(m) for m in source) else source


def compaction_snapshot(key: ConversationKey) -> CompactionSnapshot:
    """The stored list, what a summary of it replaces, and that prefix's identity (None when there is nothing to
    summarise). Reads a list over the seed cap too: compaction is what brings it back under."""
    snapshot = load_conversation_snapshot(key, over_cap=True)
    messages = snapshot.messages
    source = compaction_source(messages)
    if not source:
        return CompactionSnapshot(messages, [], None)
    length = latest_turn_start(messages)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {HEADER} WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s "
            "AND version = %s",
            [key.workflow_id, key.generation, key.agent_node_id, snapshot.version],
        )
        row = cursor.fetchone()
    if row is None:  # written again since the read: the next turn's compaction takes it from there
        return CompactionSnapshot(messages, [], None)
    # Hashed here from the messages read, not read back from the rows, so the identity is that of the very messages
    # summarised (the rows' chains are computed the same way: message_hash without `ts`).
    chain = chain_of(message_hash(m) for m in messages[:length])[-1].hex()
    return CompactionSnapshot(messages, source, PrefixIdentity(row[0], length, chain))


def _prefix_unchanged(header: tuple | None, identity: PrefixIdentity) -> str:
    """'' when the stored list still starts with the summarised prefix, else why not."""
    if header is None or header[0] != identity.conversation_id:
        return "the conversation was cleared"
    if header[2] < identity.length:
        return "the summarised turns changed"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT chain FROM {ROWS} WHERE conversation_id = %s AND position = %s",
            [identity.conversation_id, identity.length - 1],
        )
        row = cursor.fetchone()
    if row is None or bytes(row[0]).hex() != identity.chain:
        return "the summarised turns changed"
    return ""


def compaction_land_locked(
    key: ConversationKey,
    identity: PrefixIdentity,
    summary: str,
    *,
    count_tokens: Callable[[list[dict]], int],
    retain: bool = True,
) -> CompactionOutcome:
    """Land `summary` inside the caller's transaction (it takes the header's lock): discarded when the prefix it
    summarises changed, or when the result would not be smaller. `retain=False`: the caller knows no firing goes
    on sending the replaced list (it holds the lease itself, or is the lease holder and follows the new list), so
    no copy of it is kept (retained.py)."""
    if not connection.in_atomic_block:
        raise RuntimeError("compaction_land_locked must run inside a transaction")
    header = conversation_header_for_update(key, create=False)
    changed = _prefix_unchanged(header, identity)
    if changed:
        return CompactionOutcome("discarded", changed)
    conversation_id, version, count, size, digest = header
    messages = load_conversation_snapshot(key, over_cap=True).messages  # under the lock: exactly the stored list
    candidate = compaction_activation(messages, identity.length, summary)
    try:
        validate_messages(candidate)
        stored_json(candidate)
    except (WireError, TypeError, ValueError) as exc:
        return CompactionOutcome("discarded", f"candidate does not serialize: {exc}", message_count=len(messages))
    before, after = count_tokens(messages), count_tokens(candidate)
    if after >= before:
        return CompactionOutcome("discarded", "candidate is not smaller", before, after, len(messages))
    if retain:
        retain_for_lease_holders([conversation_id])
    result = write_locked(key, header, candidate, reason="compaction")
    logger.info(
        "conversation compacted",
        extra={**key.as_log(), "tokens_before": before, "tokens_after": after, "kept": len(messages) - identity.length},
    )
    return CompactionOutcome(
        "compacted",
        "ok",
        before,
        after,
        result.message_count,
        result.version,
        replaced=StoredPrefix(count, version, digest, size),
        written=StoredPrefix.of(result),
    )


def compaction_summarize(
    key: ConversationKey, snapshot: CompactionSnapshot, summarize: Callable[[list[dict]], str]
) -> str:
    """The summarizer's text for `snapshot.source`, outside any transaction (no row lock is held across it)."""
    try:
        summary = summarize(snapshot.source)
    except Exception as exc:
        raise CompactionError(message=f"The summarizer failed: {exc}", extra=key.as_log()) from exc
    if not isinstance(summary, str) or not summary.strip():
        raise CompactionError(message="The summarizer returned no summary.", extra=key.as_log())
    return summary.strip()


def compact_conversation(
    key: ConversationKey,
    *,
    summarize: Callable[[list[dict]], str],
    count_tokens: Callable[[list[dict]], int],
) -> CompactionOutcome:
    """Snapshot, summarize, land: the whole compaction in one call (no slot, no lease: for callers that hold what
    they need, and the store's own tests)."""
    snapshot = compaction_snapshot(key)
    if snapshot.identity is None:
        return CompactionOutcome("skipped", "nothing older than the latest turn", message_count=len(snapshot.messages))
    summary = compaction_summarize(key, snapshot, summarize)
    with transaction.atomic():
        return compaction_land_locked(key, snapshot.identity, summary, count_tokens=count_tokens)
