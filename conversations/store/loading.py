"""Loading a stored list: one statement reads the header and the rows past what this process already holds
(docs/architecture.md#conversation-store); unreadable rows are loud (docs/invariants.md#save-failures)."""

from __future__ import annotations

import json
import logging

from django.conf import settings
from django.db import DatabaseError, connection

from conversations.models import EMPTY_DIGEST, AgentConversation, ConversationCompaction, ConversationMessage
from providers.readonly import read_only
from providers.wire import ROLES, WireError

from .copies import ProcessCopy as _Copy
from .copies import gc_paused as _gc_paused
from .copies import process_copies as _copies
from .errors import ConversationConflict, ConversationLoadFailed, ConversationTooLarge
from .keys import ConversationKey
from .results import HEADER as _HEADER
from .results import ROWS as _ROWS
from .results import LoadedConversation, StoredPrefix
from .transcript import close_unanswered_tool_calls

logger = logging.getLogger("conversations.store")
_SLOT = ConversationCompaction._meta.db_table


def _too_large(key: ConversationKey, size: int) -> ConversationTooLarge:
    cap = settings.CONVERSATION_SEED_MAX_BYTES
    return ConversationTooLarge(
        message=(
            f"This agent's stored conversation is {size:,} bytes, over the {cap:,}-byte limit. "
            "Clear the agent's Context (open its Context panel and press Clear) to start the conversation fresh."
        ),
        extra=key.as_log(),
    )


def _check_loaded(messages: list) -> None:
    for index, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or message.get("role") not in ROLES
            or not isinstance(message.get("blocks"), list)
        ):
            raise WireError(f"messages[{index}] is not a message")


def _read_rows(key: ConversationKey, start: int, cap: int) -> tuple | None:
    """Header and the rows from `start` on, in one statement (one snapshot), with the chain at `start - 1` so the
    caller can tell whether the messages before `start` are still the ones it holds. The rows are aggregated into
    one JSON array (one parse instead of one per row) and skipped entirely when the conversation is over the cap."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT c.id, c.version, c.digest, c.size_bytes, c.message_count, "
                f"(SELECT p.chain FROM {_ROWS} p WHERE p.conversation_id = c.id AND p.position = %s), "
                "agg.data, agg.row_count, "
                # Whether a summary waits to land (compaction_slot.py): read here so a firing's load tells it for
                # free; the firing that loads lands it (agents/services/compaction.py).
                f"(SELECT s.state = 'ready' FROM {_SLOT} s WHERE s.workflow_id = c.workflow_id "
                "AND s.generation = c.generation AND s.agent_node_id = c.agent_node_id) "
                f"FROM {_HEADER} c LEFT JOIN LATERAL (SELECT json_agg(m.data ORDER BY m.position)::text AS data, "
                f"count(*) AS row_count FROM {_ROWS} m WHERE m.conversation_id = c.id AND m.position >= %s "
                "AND c.size_bytes <= %s) agg "
                "ON true WHERE c.workflow_id = %s AND c.generation = %s AND c.agent_node_id = %s",
                [
                    start - 1,
                    start,
                    cap,
                    key.workflow_id,
                    key.generation,
                    key.agent_node_id,
                ],
            )
            return cursor.fetchone()
    except DatabaseError as exc:
        raise ConversationLoadFailed(
            message=f"The stored conversation could not be read: {exc}", extra=key.as_log()
        ) from exc


def load_conversation_snapshot(key: ConversationKey, *, over_cap: bool = False) -> LoadedConversation:
    """The stored messages exactly as stored. Raises ConversationLoadFailed / ConversationTooLarge (not with
    `over_cap`: compaction reads a list over the cap to bring it back under).

    A process that holds a copy of the conversation reads only the rows past it, after checking (by the stored
    chain digest at the copy's last message) that the stored list still starts with the copy: a worker that ran
    an earlier turn of this conversation pays for the new messages, not for the whole list."""
    if key.generation == 0:
        return LoadedConversation(key, [], 0, EMPTY_DIGEST, 0, False)
    copy = _copies.get(key)
    start = len(copy.messages) if copy is not None else 0
    cap = 2**62 if over_cap else settings.CONVERSATION_SEED_MAX_BYTES
    row = _read_rows(key, start, cap)
    if (
        row is not None
        and start
        and (row[0] != copy.conversation_id or row[5] is None or bytes(row[5]).hex() != copy.digest)
    ):
        start, row = 0, _read_rows(key, 0, cap)  # the stored list no longer starts with the copy: read it whole
    if row is None:
        return LoadedConversation(key, [], 0, EMPTY_DIGEST, 0, False)
    conversation_id, version, digest, size_bytes, message_count, _chain, data, row_count, ready = row
    if size_bytes > cap:
        raise _too_large(key, size_bytes)
    try:
        if row_count != message_count - start:
            raise WireError(f"{row_count} message rows past {start} for {message_count} messages")
        with _gc_paused():
            new = read_only(json.loads(data)) if data else []
        _check_loaded(new)
    except (ValueError, WireError) as exc:
        logger.error("stored conversation is unreadable", extra={**key.as_log(), "error": str(exc)})
        raise ConversationLoadFailed(
            message=f"The stored conversation is unreadable ({exc}).", extra=key.as_log()
        ) from exc
    messages = [*copy.messages, *new] if start else list(new)
    # The caller and the copy share the read-only messages, each with its own list around them.
    _copies.put(key, _Copy(conversation_id, version, list(messages), size_bytes, digest))
    return LoadedConversation(key, messages, version, digest, size_bytes, True, compaction_ready=bool(ready))


def load_conversation(key: ConversationKey) -> list[dict]:
    """The stored messages, `[]` when there is no row, with unanswered tool calls closed
    (docs/invariants.md#closed-on-load)."""
    return close_unanswered_tool_calls(load_conversation_snapshot(key).messages)


def stored_cursor(key: ConversationKey) -> dict:
    """`{length, digest}` of the stored list, read from the header (no message JSON is read)."""
    row = (
        AgentConversation.objects.filter(
            workflow_id=key.workflow_id, generation=key.generation, agent_node_id=key.agent_node_id
        )
        .values_list("message_count", "digest")
        .first()
    )
    if row is None:
        return {"length": 0, "digest": EMPTY_DIGEST}
    return {"length": row[0], "digest": row[1]}


def stored_starts_with(key: ConversationKey, cursor: dict) -> bool:
    """Does the stored conversation still start as `cursor` says? Reads one row's chained digest, no JSON."""
    length = int(cursor["length"])
    if length == 0:
        return cursor["digest"] == EMPTY_DIGEST
    chain = (
        ConversationMessage.objects.filter(
            conversation__workflow_id=key.workflow_id,
            conversation__generation=key.generation,
            conversation__agent_node_id=key.agent_node_id,
            position=length - 1,
        )
        .values_list("chain", flat=True)
        .first()
    )
    return chain is not None and bytes(chain).hex() == cursor["digest"]


def conversation_prefix_messages(key: ConversationKey, prefix: StoredPrefix) -> list[dict]:
    """The stored list `prefix` names (read-only messages), from this process's copy when it is that list, else
    read; when the stored list moved on since (the owner cleared it mid-turn, a branch move rewound it), the copy
    the store kept for the firing that holds the key's lease (`retained.py`). Raises ConversationConflict when
    neither has it. A firing builds every request from this plus its own unsaved messages."""
    if prefix.length == 0:
        return []
    copy = _copies.get(key)
    if copy is not None and (copy.version, copy.digest, len(copy.messages)) == (
        prefix.version,
        prefix.digest,
        prefix.length,
    ):
        return list(copy.messages)
    snapshot = load_conversation_snapshot(key)
    if (snapshot.version, snapshot.digest, len(snapshot.messages)) == (prefix.version, prefix.digest, prefix.length):
        return snapshot.messages
    if len(snapshot.messages) > prefix.length and stored_starts_with(
        key, {"length": prefix.length, "digest": prefix.digest}
    ):
        return snapshot.messages[: prefix.length]  # extended since (a later turn): it still starts that way
    from .retained import retained_messages

    kept = retained_messages(key, prefix)
    if kept is None:
        raise ConversationConflict(
            message="The stored conversation this firing extends is gone.",
            extra={**key.as_log(), "version": snapshot.version},
        )
    return kept
