"""The entry points of a write: `save_conversation` (the whole list; docs/invariants.md#only-two-writers),
`save_conversation_safely` (docs/invariants.md#save-failures) and `replace_conversation_locked` (branch moves)."""

from __future__ import annotations

import logging

from django.db import connection, transaction

from conversations.models import EMPTY_DIGEST

from .appending import append_after_known_prefix as _append_after_known_prefix
from .appending import append_in_one_statement as _append_in_one_statement
from .errors import ConversationConflict, ConversationInvalid
from .keys import ConversationKey
from .locks import conversation_header_for_update
from .results import SaveResult, StoredPrefix
from .retained import retain_for_lease_holders
from .rows import check_list as _check_list
from .rows import write_locked as _write_locked

logger = logging.getLogger("conversations.store")


def save_conversation(
    key: ConversationKey,
    messages: list[dict],
    *,
    expected_version: int | None = None,
    known_prefix: StoredPrefix | None = None,
) -> SaveResult:
    """Make the stored list `messages` (the whole list), writing only what changed past the stored prefix.

    Stamps `ts` on written messages that lack one (the unchanged prefix keeps its stored `ts`); the caller's
    dicts are not modified. Listeners and `context.updated` run after commit. With `expected_version` (from
    `load_conversation_snapshot(key).version`), a row another writer changed since raises ConversationConflict
    instead of being overwritten. Raises on failure; after a billed provider call use `save_conversation_safely`.
    """
    if not isinstance(messages, list):
        raise ConversationInvalid(message="messages must be a list of MessageWire dicts")
    if key.generation == 0:
        return SaveResult(key, False, len(messages), 0, 0, 0, 0, EMPTY_DIGEST, stored=False)
    if known_prefix is not None:
        appended = _append_after_known_prefix(key, messages, known_prefix)
        if appended is not None:
            return appended
    # The one-statement append checks what it writes itself: its prefix equals the store's own copy.
    appended = _append_in_one_statement(key, messages, expected_version)
    if appended is not None:
        return appended
    _check_list(messages)
    with transaction.atomic():
        header = conversation_header_for_update(key, create=True)
        if expected_version is not None and header[1] != expected_version:
            raise ConversationConflict(
                message="The stored conversation changed since it was loaded.",
                extra={**key.as_log(), "version": header[1]},
            )
        return _write_locked(key, header, messages, reason="save")


def save_conversation_safely(key: ConversationKey, messages: list[dict], **options) -> SaveResult | None:
    """`save_conversation` that never raises: a failed save after a billed call is logged with the key, and the
    turn goes on (docs/invariants.md#save-failures). Returns None when the save failed."""
    try:
        return save_conversation(key, messages, **options)
    except Exception as exc:
        logger.exception(
            "conversation save failed; the turn continues without it",
            extra={**key.as_log(), "error_type": type(exc).__name__},
        )
        return None


def replace_conversation_locked(key: ConversationKey, messages: list[dict], *, reason: str = "replace") -> SaveResult:
    """Rewrite a stored conversation inside `lock_conversations` (chat branch moves, rewinds)."""
    _check_list(messages)
    if not connection.in_atomic_block:
        raise RuntimeError("replace_conversation_locked must run inside lock_conversations()")
    header = conversation_header_for_update(key, create=True)  # re-locking a row this transaction holds returns at once
    retain_for_lease_holders([header[0]])
    return _write_locked(key, header, messages, reason=reason)
