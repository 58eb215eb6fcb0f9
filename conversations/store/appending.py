"""Appends that cost the size of the turn: a firing names the stored prefix it extends, and the rows past it are
written by one statement conditional on that version (docs/architecture.md#conversation-store)."""

from __future__ import annotations

import itertools

from django.db import DatabaseError, connection, transaction

from conversations.events import ConversationChange, announce_change_on_commit
from conversations.models import EMPTY_DIGEST
from providers.wire import WireError, validate_messages

from .copies import ProcessCopy as _Copy
from .copies import process_copies as _copies
from .errors import ConversationConflict, ConversationInvalid
from .keys import ConversationKey
from .locks import conversation_header_for_update
from .results import HEADER as _HEADER
from .results import INSERT_CHUNK as _INSERT_CHUNK
from .results import ROWS as _ROWS
from .results import SaveResult, StoredPrefix
from .rows import NewRows as _NewRows
from .rows import check_list as _check_list
from .rows import common_prefix as _common_prefix
from .rows import validate_suffix as _validate_suffix
from .rows import write_rows_locked as _write_rows_locked


def _append_where(key: ConversationKey, rows: _NewRows, claim: str, claim_params: list, *, version: int) -> bool:
    """Append `rows` in one statement: the header update takes the header's row lock and the rows are inserted
    only when `claim` (a condition on the header that pins its `version`) held, so it is exactly the locked save
    without a transaction's round trips. False when the claim failed (the caller then takes the lock)."""
    values = "(%s::integer, %s::varchar, %s::json, %s::bytea, %s::bytea, %s::integer)"
    params: list = [rows.start + len(rows.texts), rows.size, rows.digest, *claim_params]
    for i in range(len(rows.texts)):
        params += rows.values(i)
    sql = (
        f"WITH claimed AS (UPDATE {_HEADER} SET message_count = %s, size_bytes = size_bytes + %s, "
        f"version = version + 1, digest = %s, updated_at = now() WHERE {claim} RETURNING id) "
        f"INSERT INTO {_ROWS} (conversation_id, position, role, data, hash, chain, size_bytes) "
        "SELECT claimed.id, v.* FROM claimed, "
        f"(VALUES {', '.join([values] * len(rows.texts))}) AS v(position, role, data, hash, chain, size_bytes)"
    )
    # Inside a caller's transaction a savepoint keeps it usable if the statement fails; in autocommit the
    # statement is its own transaction.
    if connection.in_atomic_block:
        inserted = _rowcount_in_savepoint(sql, params)
    else:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            inserted = cursor.rowcount
    if inserted != len(rows.texts):
        return False
    count = rows.start + len(rows.texts)
    announce_change_on_commit(
        ConversationChange(key.workflow_id, key.generation, key.agent_node_id, count, version, "save")
    )
    return True


_savepoint_numbers = itertools.count(1)


def _rowcount_in_savepoint(sql: str, params: list) -> int:
    """Run `sql` in a savepoint of the caller's transaction and return its row count, the SAVEPOINT, the statement
    and the RELEASE sent as one round trip (the simple query protocol runs several statements; a turn's save is in
    every persist). When the statement fails, the savepoint is rolled back (the caller's transaction stays usable,
    as with `transaction.atomic()`) and the error raised."""
    name = f"store_append_{next(_savepoint_numbers)}"
    with connection.cursor() as cursor:
        try:
            cursor.execute(f"SAVEPOINT {name}; {sql}; RELEASE SAVEPOINT {name}", params)
        except DatabaseError:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}")
            raise
        cursor.nextset()  # the statement's result, after the SAVEPOINT's
        return cursor.rowcount


def append_in_one_statement(
    key: ConversationKey, messages: list[dict], expected_version: int | None
) -> SaveResult | None:
    """The common case — this process holds the verified copy and the caller appended a turn — as one statement
    conditional on the copy's version. None when the case does not apply or the header moved on."""
    copy = _copies.get(key)
    if copy is None or (expected_version is not None and expected_version != copy.version):
        return None
    stored_count = len(copy.messages)
    added = len(messages) - stored_count
    if added <= 0 or added > _INSERT_CHUNK or _common_prefix(messages, copy.messages, stored_count) != stored_count:
        return None
    _validate_suffix(messages, stored_count)
    rows = _NewRows.after(messages, stored_count, bytes.fromhex(copy.digest))
    version = copy.version + 1
    if not _append_where(key, rows, "id = %s AND version = %s", [copy.conversation_id, copy.version], version=version):
        return None
    size = copy.size_bytes + rows.size
    entry = _Copy(copy.conversation_id, version, copy.messages + rows.parsed(), size, rows.digest)
    transaction.on_commit(lambda: _copies.put(key, entry))
    return SaveResult(key, True, len(messages), stored_count, added, 0, version, rows.digest, size_bytes=size)


def _extend_copy_on_commit(key: ConversationKey, prefix: StoredPrefix, rows: _NewRows, version: int) -> None:
    """After an append that named its prefix, keep this process's copy current when it held exactly that prefix
    (the next step of the same firing, run in this process, then builds its request without reading the rows)."""
    copy = _copies.get(key)
    if copy is None or copy.version != prefix.version or copy.digest != prefix.digest:
        _copies.drop(key)
        return
    if len(copy.messages) != prefix.length:
        _copies.drop(key)
        return
    entry = _Copy(
        copy.conversation_id, version, copy.messages + rows.parsed(), copy.size_bytes + rows.size, rows.digest
    )
    transaction.on_commit(lambda: _copies.put(key, entry))


def append_after_known_prefix(key: ConversationKey, messages: list[dict], prefix: StoredPrefix) -> SaveResult | None:
    """An appended turn when the caller vouches that `messages[:prefix.length]` is the stored list it knows.

    No part of the stored list is read or compared: the header update is conditional on (version, digest,
    count), so a list another writer changed since is never appended to, and the new rows' hash chain starts
    from the known digest. This is what keeps an appended turn's cost flat in a process that holds no copy of
    the conversation (a worker pool: the step that saves is rarely the process that loaded). Returns None when
    the case does not apply or the header moved on; the caller then takes the verified path.
    """
    added = len(messages) - prefix.length
    if prefix.length <= 0 or added <= 0 or added > _INSERT_CHUNK:
        return None
    _validate_suffix(messages, prefix.length)
    return _append_rows_after(key, _NewRows.after(messages, prefix.length, bytes.fromhex(prefix.digest)), prefix)


def _append_rows_after(key: ConversationKey, rows: _NewRows, prefix: StoredPrefix) -> SaveResult | None:
    claim = "workflow_id = %s AND generation = %s AND agent_node_id = %s AND version = %s AND digest = %s "
    claim += "AND message_count = %s"
    claim_params = [key.workflow_id, key.generation, key.agent_node_id, prefix.version, prefix.digest, prefix.length]
    version = prefix.version + 1
    if not _append_where(key, rows, claim, claim_params, version=version):
        return None
    _extend_copy_on_commit(key, prefix, rows, version)
    size = None if prefix.size_bytes is None else prefix.size_bytes + rows.size
    count = prefix.length + len(rows.texts)
    return SaveResult(key, True, count, prefix.length, len(rows.texts), 0, version, rows.digest, size_bytes=size)


def append_conversation(
    key: ConversationKey, new_messages: list[dict], *, after: StoredPrefix, context: list[dict] = ()
) -> SaveResult:
    """Append `new_messages` to the stored list the caller knows (`after`), writing only the new rows.

    The caller never passes (or holds) the stored list: this is how a firing saves its turn with a write the
    size of the turn, in any process. `context`: the messages just before the new ones when the new ones start
    with tool results (validation pairs each result with its call; they are not written). Raises
    ConversationConflict when the stored list is no longer `after` (cleared, rewound, compacted meanwhile).
    """
    _check_list(new_messages)
    if key.generation == 0:
        return SaveResult(key, False, after.length + len(new_messages), 0, 0, 0, 0, EMPTY_DIGEST, stored=False)
    if not new_messages:
        return SaveResult(key, False, after.length, after.length, 0, 0, after.version, after.digest, after.size_bytes)
    try:
        validate_messages([*context, *new_messages])
    except WireError as exc:
        raise ConversationInvalid(message=f"Refusing to store an invalid conversation: {exc}") from exc
    rows = _NewRows.of_suffix(new_messages, after.length, bytes.fromhex(after.digest))
    if after.length > 0 and len(new_messages) <= _INSERT_CHUNK:
        appended = _append_rows_after(key, rows, after)
        if appended is not None:
            return appended
    with transaction.atomic():
        conversation_id, version, count, size, digest = conversation_header_for_update(key, create=True)
        if (version, count, digest) != (after.version, after.length, after.digest):
            raise ConversationConflict(
                message="The stored conversation changed since it was loaded.",
                extra={**key.as_log(), "version": version},
            )
        header = (conversation_id, version, count, size, digest)
        return _write_rows_locked(key, header, rows, after.length + len(new_messages), reason="save")
