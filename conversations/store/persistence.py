"""Load and save stored conversations: one header row (the lock) plus one row per message.

Save cost must not grow with the conversation. Callers pass the whole list, so the store finds the common prefix
with what is stored and writes only past it. Finding that prefix without re-serializing the whole list uses a
per-process verified copy of the stored messages. A load hands out the copy's own message objects, read-only
(`readonly.py`), so a caller that saves `[*loaded, *new]` is checked by identity, one pointer per message; a
message the caller built anew is compared by content (a C-level walk, far cheaper than hashing), so no caller can
make the store skip a change. When the copy is missing or stale (another process wrote since), the stored
per-message hashes are compared instead, which is correct but costs a hash of the list.
"""

from __future__ import annotations

import gc
import json
import logging
import operator
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from conversations.events import ConversationChange, announce_change_on_commit
from conversations.models import EMPTY_DIGEST, AgentConversation, ConversationMessage
from providers.wire import ROLES, WireError, validate_messages

from .errors import ConversationConflict, ConversationInvalid, ConversationLoadFailed, ConversationTooLarge
from .keys import ConversationKey
from .readonly import read_only
from .retained import retain_for_lease_holders
from .transcript import EMPTY_CHAIN, chain_of, close_unanswered_tool_calls, message_hash, stored_json, without_ts

logger = logging.getLogger(__name__)

_HEADER = AgentConversation._meta.db_table
_ROWS = ConversationMessage._meta.db_table
_INSERT_CHUNK = 1000


@dataclass(frozen=True)
class SaveResult:
    key: ConversationKey
    changed: bool
    message_count: int
    kept: int  # messages of the common prefix, left untouched
    written: int  # rows inserted
    removed: int  # rows deleted past the common prefix
    version: int
    digest: str
    stored: bool = True  # False for generation 0 (manual test runs store nothing)
    size_bytes: int | None = None  # the stored list's serialized size after the save, when the save knows it


@dataclass(frozen=True)
class LoadedConversation:
    """The stored list as is (not repaired), with what compaction's compare-and-swap and chat cursors need."""

    key: ConversationKey
    messages: list[dict]
    version: int
    digest: str
    size_bytes: int
    exists: bool

    @property
    def cursor(self) -> dict:
        return {"length": len(self.messages), "digest": self.digest}


@dataclass(frozen=True)
class LockedConversation:
    key: ConversationKey
    conversation_id: int
    version: int
    message_count: int
    digest: str

    @property
    def cursor(self) -> dict:
        return {"length": self.message_count, "digest": self.digest}


# --- the per-process verified copies -----------------------------------------------------------------------


@dataclass
class _Copy:
    conversation_id: int
    version: int
    messages: list[dict] = field(repr=False)  # parsed from the stored JSON; never handed to a caller
    size_bytes: int = 0
    digest: str = EMPTY_DIGEST


class _Copies:
    def __init__(self) -> None:
        self._entries: OrderedDict[ConversationKey, _Copy] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: ConversationKey) -> _Copy | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: ConversationKey, entry: _Copy) -> None:
        limit, max_bytes = settings.CONVERSATION_CACHE_ENTRIES, settings.CONVERSATION_CACHE_MAX_BYTES
        if limit <= 0 or entry.size_bytes > max_bytes:
            self.drop(key)
            return
        with self._lock:
            current = self._entries.get(key)
            # A late on-commit hook must not replace a newer copy installed by another thread.
            if (
                current is not None
                and current.conversation_id == entry.conversation_id
                and current.version > entry.version
            ):
                return
            self._entries[key] = entry
            self._entries.move_to_end(key)
            total = sum(e.size_bytes for e in self._entries.values())
            while len(self._entries) > limit or total > max_bytes:
                _, evicted = self._entries.popitem(last=False)
                total -= evicted.size_bytes

    def drop(self, key: ConversationKey) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_copies = _Copies()


def forget_process_copies(key: ConversationKey | None = None) -> None:
    """Drop this process's copy of `key` (or of every key), as if another process had written last. Tests and the
    benchmark use it to exercise the cold path."""
    if key is None:
        _copies.clear()
    else:
        _copies.drop(key)


@contextmanager
def _gc_paused():
    # Parsing a long conversation allocates tens of thousands of containers; letting the cyclic collector run
    # in the middle of it (and traverse the whole process) costs more than the parse itself.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# --- load ----------------------------------------------------------------------------------------------------


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


def _read_rows(key: ConversationKey, start: int) -> tuple | None:
    """Header and the rows from `start` on, in one statement (one snapshot), with the chain at `start - 1` so the
    caller can tell whether the messages before `start` are still the ones it holds. The rows are aggregated into
    one JSON array (one parse instead of one per row) and skipped entirely when the conversation is over the cap."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT c.id, c.version, c.digest, c.size_bytes, c.message_count, "
                f"(SELECT p.chain FROM {_ROWS} p WHERE p.conversation_id = c.id AND p.position = %s), "
                "agg.data, agg.row_count "
                f"FROM {_HEADER} c LEFT JOIN LATERAL (SELECT json_agg(m.data ORDER BY m.position)::text AS data, "
                f"count(*) AS row_count FROM {_ROWS} m WHERE m.conversation_id = c.id AND m.position >= %s "
                "AND c.size_bytes <= %s) agg "
                "ON true WHERE c.workflow_id = %s AND c.generation = %s AND c.agent_node_id = %s",
                [
                    start - 1,
                    start,
                    settings.CONVERSATION_SEED_MAX_BYTES,
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


def load_conversation_snapshot(key: ConversationKey) -> LoadedConversation:
    """The stored messages exactly as stored. Raises ConversationLoadFailed / ConversationTooLarge.

    A process that holds a copy of the conversation reads only the rows past it, after checking (by the stored
    chain digest at the copy's last message) that the stored list still starts with the copy: a worker that ran
    an earlier turn of this conversation pays for the new messages, not for the whole list."""
    if key.generation == 0:
        return LoadedConversation(key, [], 0, EMPTY_DIGEST, 0, False)
    copy = _copies.get(key)
    start = len(copy.messages) if copy is not None else 0
    row = _read_rows(key, start)
    if (
        row is not None
        and start
        and (row[0] != copy.conversation_id or row[5] is None or bytes(row[5]).hex() != copy.digest)
    ):
        start, row = 0, _read_rows(key, 0)  # the stored list no longer starts with the copy: read it whole
    if row is None:
        return LoadedConversation(key, [], 0, EMPTY_DIGEST, 0, False)
    conversation_id, version, digest, size_bytes, message_count, _chain, data, row_count = row
    if size_bytes > settings.CONVERSATION_SEED_MAX_BYTES:
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
    return LoadedConversation(key, messages, version, digest, size_bytes, True)


def load_conversation(key: ConversationKey) -> list[dict]:
    """The stored messages, `[]` when there is no row, with unanswered tool calls closed (SPEC §2 invariant 5)."""
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


# --- save ----------------------------------------------------------------------------------------------------


def _lock_header(key: ConversationKey, *, create: bool) -> tuple | None:
    """Lock the conversation's header row (creating it when asked). Every write of its messages holds this lock."""
    select = (
        f"SELECT id, version, message_count, size_bytes, digest FROM {_HEADER} "
        "WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s FOR UPDATE"
    )
    params = [key.workflow_id, key.generation, key.agent_node_id]
    with connection.cursor() as cursor:
        cursor.execute(select, params)
        row = cursor.fetchone()
        if row is None and create:
            # ON CONFLICT: a concurrent creator wins the insert and we wait for its lock instead of failing.
            cursor.execute(
                f"INSERT INTO {_HEADER} (workflow_id, generation, agent_node_id, message_count, size_bytes, version, "
                "digest, created_at, updated_at) VALUES (%s, %s, %s, 0, 0, 0, %s, now(), now()) "
                "ON CONFLICT (workflow_id, generation, agent_node_id) DO NOTHING",
                [*params, EMPTY_DIGEST],
            )
            cursor.execute(select, params)
            row = cursor.fetchone()
    return row


def _common_prefix(messages: list[dict], stored: list[dict], stored_count: int) -> int:
    limit = min(len(messages), stored_count)
    index = 0
    while index < limit:
        if messages[index] == stored[index]:
            # Most likely the rest is equal too: one C-level comparison of the remaining slices settles it; only
            # when it is not are the elements compared one by one (still in C) to find where.
            if messages[index:limit] == stored[index:limit]:
                return limit
            index += list(map(operator.eq, messages[index:limit], stored[index:limit])).index(False)
        # `ts` is view-only: a message that differs only by it is the same message (the stored ts stays).
        if not isinstance(messages[index], dict) or without_ts(messages[index]) != without_ts(stored[index]):
            return index
        index += 1
    return limit


def _common_prefix_by_hash(messages: list[dict], hashes: list[bytes]) -> int:
    limit = min(len(messages), len(hashes))
    for index in range(limit):
        if message_hash(messages[index]) != hashes[index]:
            return index
    return limit


def _validate_suffix(messages: list[dict], start: int) -> None:
    """Validate what is about to be written, with enough context before it to pair tool results with calls."""
    if start >= len(messages):
        return
    context = start
    while context > 0 and isinstance(messages[context], dict) and messages[context].get("role") == "tool":
        context -= 1
    try:
        validate_messages(messages[context:])
    except WireError as exc:
        raise ConversationInvalid(message=f"Refusing to store an invalid conversation: {exc}") from exc


def _check_list(messages) -> None:
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ConversationInvalid(message="messages must be a list of MessageWire dicts")


@dataclass(frozen=True)
class _NewRows:
    """What a save writes for `messages[start:]`: each message with its `ts` stamped, as stored JSON, its hash and
    the chain continuing from the prefix's digest. Built before any write, so a message that cannot be stored
    fails the save before it changes anything."""

    start: int
    roles: list[str]
    texts: list[str]
    hashes: list[bytes]
    chains: list[bytes]
    sizes: list[int]
    previous: bytes

    @classmethod
    def after(cls, messages: list[dict], start: int, previous: bytes) -> _NewRows:
        return cls.of_suffix(messages[start:], start, previous)

    @classmethod
    def of_suffix(cls, new_messages: list[dict], start: int, previous: bytes) -> _NewRows:
        now = timezone.now().isoformat()
        suffix = [m if m.get("ts") else {**m, "ts": now} for m in new_messages]
        try:
            texts = [stored_json(m) for m in suffix]
        except (TypeError, ValueError) as exc:
            raise ConversationInvalid(message=f"A message is not JSON-serializable: {exc}") from exc
        hashes = [message_hash(m) for m in suffix]
        return cls(
            start,
            [m.get("role", "") for m in suffix],
            texts,
            hashes,
            chain_of(hashes, previous),
            [len(text.encode()) for text in texts],
            previous,
        )

    @property
    def digest(self) -> str:
        return (self.chains[-1] if self.chains else self.previous).hex()

    @property
    def size(self) -> int:
        return sum(self.sizes)

    def values(self, i: int) -> list:
        """(position, role, data, hash, chain, size_bytes) of the i-th new row."""
        return [self.start + i, self.roles[i], self.texts[i], self.hashes[i], self.chains[i], self.sizes[i]]

    def parsed(self) -> list[dict]:
        """The new messages as this process's copy keeps them: parsed back from what was stored, read-only like a
        loaded row (validated on the way in, so a request built from the copy is not validated again)."""
        return [read_only(json.loads(text)) for text in self.texts]


def _write_locked(key: ConversationKey, header: tuple, messages: list[dict], *, reason: str) -> SaveResult:
    conversation_id, version, stored_count, stored_size, stored_digest = header
    copy = _copies.get(key)
    if copy is not None and (copy.conversation_id, copy.version) != (conversation_id, version):
        copy = None
    if copy is not None and len(copy.messages) == stored_count:
        kept = _common_prefix(messages, copy.messages, stored_count)
    else:
        copy = None
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT hash FROM {_ROWS} WHERE conversation_id = %s ORDER BY position", [conversation_id])
            kept = _common_prefix_by_hash(messages, [bytes(row[0]) for row in cursor.fetchall()])
    if kept == len(messages) == stored_count:
        # Nothing changed: no write, no version bump, no event (an idempotent replay announces nothing).
        return SaveResult(key, False, stored_count, kept, 0, 0, version, stored_digest, size_bytes=stored_size)
    _validate_suffix(messages, kept)
    removed = stored_count - kept

    with connection.cursor() as cursor:
        if kept == stored_count:
            previous = bytes.fromhex(stored_digest)
        elif kept == 0:
            previous = EMPTY_CHAIN
        else:
            cursor.execute(
                f"SELECT chain FROM {_ROWS} WHERE conversation_id = %s AND position = %s", [conversation_id, kept - 1]
            )
            previous = bytes(cursor.fetchone()[0])
        rows = _NewRows.after(messages, kept, previous)  # raises before anything is written
        removed_size = 0
        if removed:
            cursor.execute(
                f"WITH gone AS (DELETE FROM {_ROWS} WHERE conversation_id = %s AND position >= %s "
                "RETURNING size_bytes) "
                "SELECT coalesce(sum(size_bytes), 0) FROM gone",
                [conversation_id, kept],
            )
            removed_size = cursor.fetchone()[0]
        count, digest, size = len(messages), rows.digest, stored_size - removed_size + rows.size
        header_update = (
            f"UPDATE {_HEADER} SET message_count = %s, size_bytes = %s, version = version + 1, digest = %s, "
            "updated_at = now() WHERE id = %s"
        )
        header_params = [count, size, digest, conversation_id]
        starts = list(range(0, len(rows.texts), _INSERT_CHUNK))
        if not starts:
            cursor.execute(header_update, header_params)
        for first in starts:
            chunk = range(first, min(first + _INSERT_CHUNK, len(rows.texts)))
            values = ", ".join(["(%s, %s, %s, %s::json, %s, %s, %s)"] * len(chunk))
            params: list = []
            for i in chunk:
                params += [conversation_id, *rows.values(i)]
            insert = (
                f"INSERT INTO {_ROWS} (conversation_id, position, role, data, hash, chain, size_bytes) VALUES {values}"
            )
            if first == starts[-1]:
                # The last insert and the header update travel as one statement: one round trip fewer per turn.
                cursor.execute(f"WITH inserted AS ({insert}) {header_update}", params + header_params)
            else:
                cursor.execute(insert, params)
    new_version = version + 1

    if copy is not None:
        entry = _Copy(conversation_id, new_version, copy.messages[:kept] + rows.parsed(), size, digest)
        # Only a committed state may be trusted as "what is stored".
        transaction.on_commit(lambda: _copies.put(key, entry))
    else:
        _copies.drop(key)
    announce_change_on_commit(
        ConversationChange(key.workflow_id, key.generation, key.agent_node_id, count, new_version, reason)
    )
    return SaveResult(key, True, count, kept, len(rows.texts), removed, new_version, digest, size_bytes=size)


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
    with transaction.atomic() if connection.in_atomic_block else nullcontext(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        inserted = cursor.rowcount
    if inserted != len(rows.texts):
        return False
    count = rows.start + len(rows.texts)
    announce_change_on_commit(
        ConversationChange(key.workflow_id, key.generation, key.agent_node_id, count, version, "save")
    )
    return True


def _append_in_one_statement(
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


@dataclass(frozen=True)
class StoredPrefix:
    """What a caller knows of the stored list it is extending: `length` messages at `version` with `digest`
    (and, when known, their serialized `size_bytes`).

    The runtime keeps it from its load and from each `SaveResult`, in whatever process runs the next step."""

    length: int
    version: int
    digest: str
    size_bytes: int | None = None

    @classmethod
    def of(cls, result: SaveResult) -> StoredPrefix:
        return cls(result.message_count, result.version, result.digest, result.size_bytes)

    @classmethod
    def of_snapshot(cls, snapshot: LoadedConversation) -> StoredPrefix:
        return cls(len(snapshot.messages), snapshot.version, snapshot.digest, snapshot.size_bytes)

    def as_dict(self) -> dict:
        return {"length": self.length, "version": self.version, "digest": self.digest, "size_bytes": self.size_bytes}

    @classmethod
    def from_dict(cls, data: dict) -> StoredPrefix:
        return cls(int(data["length"]), int(data["version"]), str(data["digest"]), data.get("size_bytes"))


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


def _append_after_known_prefix(key: ConversationKey, messages: list[dict], prefix: StoredPrefix) -> SaveResult | None:
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
        conversation_id, version, count, size, digest = _lock_header(key, create=True)
        if (version, count, digest) != (after.version, after.length, after.digest):
            raise ConversationConflict(
                message="The stored conversation changed since it was loaded.",
                extra={**key.as_log(), "version": version},
            )
        header = (conversation_id, version, count, size, digest)
        return _write_rows_locked(key, header, rows, after.length + len(new_messages), reason="save")


def _write_rows_locked(key: ConversationKey, header: tuple, rows: _NewRows, count: int, *, reason: str) -> SaveResult:
    """Insert `rows` after the locked header's list (which has exactly `rows.start` messages)."""
    conversation_id, version, _stored_count, stored_size, _digest = header
    with connection.cursor() as cursor:
        for first in range(0, len(rows.texts), _INSERT_CHUNK):
            chunk = range(first, min(first + _INSERT_CHUNK, len(rows.texts)))
            values = ", ".join(["(%s, %s, %s, %s::json, %s, %s, %s)"] * len(chunk))
            params: list = []
            for i in chunk:
                params += [conversation_id, *rows.values(i)]
            cursor.execute(
                f"INSERT INTO {_ROWS} (conversation_id, position, role, data, hash, chain, size_bytes) VALUES {values}",
                params,
            )
        size = stored_size + rows.size
        cursor.execute(
            f"UPDATE {_HEADER} SET message_count = %s, size_bytes = %s, version = version + 1, digest = %s, "
            "updated_at = now() WHERE id = %s",
            [count, size, rows.digest, conversation_id],
        )
    new_version = version + 1
    _copies.drop(key)
    announce_change_on_commit(
        ConversationChange(key.workflow_id, key.generation, key.agent_node_id, count, new_version, reason)
    )
    return SaveResult(key, True, count, rows.start, len(rows.texts), 0, new_version, rows.digest, size_bytes=size)


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
        header = _lock_header(key, create=True)
        if expected_version is not None and header[1] != expected_version:
            raise ConversationConflict(
                message="The stored conversation changed since it was loaded.",
                extra={**key.as_log(), "version": header[1]},
            )
        return _write_locked(key, header, messages, reason="save")


def save_conversation_safely(key: ConversationKey, messages: list[dict], **options) -> SaveResult | None:
    """`save_conversation` that never raises: a failed save after a billed call is logged with the key, and the
    turn goes on (SPEC §2 invariant 4). Returns None when the save failed."""
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
    header = _lock_header(key, create=True)  # re-locking a row this transaction holds returns at once
    retain_for_lease_holders([header[0]])
    return _write_locked(key, header, messages, reason=reason)


@contextmanager
def lock_conversations(keys) -> Iterator[dict[ConversationKey, LockedConversation]]:
    """Lock the header rows of `keys` in the fixed order (ascending key), creating missing ones, for one
    transaction. Yields `{key: LockedConversation}`; use replace_conversation_locked inside."""
    ordered = sorted(set(keys))
    with transaction.atomic():
        locked = {}
        for key in ordered:
            row = _lock_header(key, create=True)
            locked[key] = LockedConversation(key, row[0], row[1], row[2], row[4])
        yield locked


def clear_conversation(workflow, generation: int | None = None, agent_node_id: str | None = None) -> int:
    """Delete stored conversations of `workflow` (a Workflow or its id), narrowed by generation and agent.
    Returns how many conversations were deleted."""
    workflow_id = int(getattr(workflow, "pk", workflow))
    where = ["workflow_id = %s"]
    params: list = [workflow_id]
    if generation is not None:
        where.append("generation = %s")
        params.append(int(generation))
    if agent_node_id is not None:
        where.append("agent_node_id = %s")
        params.append(agent_node_id)
    with transaction.atomic(), connection.cursor() as cursor:
        # Lock in the fixed key order (byte order, as Python sorts keys) so a clear never deadlocks a branch move.
        cursor.execute(
            f"SELECT id, generation, agent_node_id FROM {_HEADER} WHERE {' AND '.join(where)} "
            'ORDER BY generation, agent_node_id COLLATE "C" FOR UPDATE',
            params,
        )
        rows = cursor.fetchall()
        if not rows:
            return 0
        ids = [row[0] for row in rows]
        retain_for_lease_holders(ids)
        cursor.execute(f"DELETE FROM {_ROWS} WHERE conversation_id = ANY(%s)", [ids])
        cursor.execute(f"DELETE FROM {_HEADER} WHERE id = ANY(%s)", [ids])
        # A runtime session continuing a cleared conversation would remember what the owner cleared.
        cursor.execute(f"DELETE FROM conversations_runtimesessionbinding WHERE {' AND '.join(where)}", params)
        cursor.execute(f"DELETE FROM conversations_runtimeinteractionpoint WHERE {' AND '.join(where)}", params)
        for _, gen, node in rows:
            key = ConversationKey(workflow_id, gen, node)
            _copies.drop(key)
            announce_change_on_commit(ConversationChange(workflow_id, gen, node, 0, 0, "clear"))
    return len(rows)


def clearable_result_sizes(key: ConversationKey, prefix: StoredPrefix) -> list[int] | None:
    """The stored size of each message of the list `prefix` names, when it holds a tool result of an earlier turn
    that is not yet a placeholder; None when it holds none (or the list is no longer `prefix`).

    One statement over the rows' own columns (role, size, the result's `meta.cleared`): deciding that nothing is
    left to clear costs no read of the messages, so a long conversation over its tool-result budget does not pay a
    serialization of itself every turn."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH c AS (SELECT id FROM {_HEADER} WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s "
            "AND version = %s AND digest = %s), "
            f"latest AS (SELECT coalesce(max(m.position), 0) AS start FROM {_ROWS} m, c WHERE m.conversation_id = c.id "
            "AND m.role = 'user' AND coalesce(m.data->'meta'->>'compaction_summary', '') <> 'true') "
            f"SELECT CASE WHEN EXISTS (SELECT 1 FROM {_ROWS} m, c, latest WHERE m.conversation_id = c.id "
            "AND m.role = 'tool' AND m.position < latest.start AND coalesce(m.data->'meta'->>'cleared', '') <> 'true') "
            f"THEN (SELECT array_agg(m.size_bytes ORDER BY m.position) FROM {_ROWS} m, c "
            "WHERE m.conversation_id = c.id) END",
            [key.workflow_id, key.generation, key.agent_node_id, prefix.version, prefix.digest],
        )
        row = cursor.fetchone()
    sizes = row[0] if row else None
    return list(sizes) if sizes and len(sizes) == prefix.length else None


def list_conversations(workflow) -> list[dict]:
    """Panel metadata of every stored conversation of `workflow`, newest generation first."""
    workflow_id = int(getattr(workflow, "pk", workflow))
    return list(
        AgentConversation.objects.filter(workflow_id=workflow_id)
        .order_by("-generation", "agent_node_id")
        .values(
            "generation",
            "agent_node_id",
            "message_count",
            "size_bytes",
            "updated_at",
            "pressure_input_tokens",
            "pressure_output_tokens",
            "context_window_tokens",
        )
    )


def conversation_pressure_record(
    key: ConversationKey, *, input_tokens: int, output_headroom_tokens: int, context_window_tokens: int | None
) -> bool:
    """Store the agent's active context pressure (for display; never a usage figure). False when no row exists."""
    updated = AgentConversation.objects.filter(
        workflow_id=key.workflow_id, generation=key.generation, agent_node_id=key.agent_node_id
    ).update(
        pressure_input_tokens=max(0, int(input_tokens)),
        pressure_output_tokens=max(0, int(output_headroom_tokens)),
        context_window_tokens=context_window_tokens,
        pressure_measured_at=timezone.now(),
    )
    return updated == 1
