"""Writing a stored list's rows under its header lock: find the common prefix with what is stored, validate and
insert only the new rows, update the header (count, size, version, digest) and announce the change on commit."""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from conversations.events import ConversationChange, announce_change_on_commit
from providers.readonly import read_only
from providers.wire import WireError, validate_messages

from .copies import ProcessCopy, process_copies
from .errors import ConversationInvalid
from .keys import ConversationKey
from .results import HEADER, INSERT_CHUNK, ROWS, SaveResult
from .transcript import EMPTY_CHAIN, chain_of, message_hash, stored_json, without_ts


def common_prefix(messages: list[dict], stored: list[dict], stored_count: int) -> int:
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


def validate_suffix(messages: list[dict], start: int) -> None:
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


def check_list(messages) -> None:
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ConversationInvalid(message="messages must be a list of MessageWire dicts")


@dataclass(frozen=True)
class NewRows:
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
    def after(cls, messages: list[dict], start: int, previous: bytes) -> NewRows:
        return cls.of_suffix(messages[start:], start, previous)

    @classmethod
    def of_suffix(cls, new_messages: list[dict], start: int, previous: bytes) -> NewRows:
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


def write_locked(key: ConversationKey, header: tuple, messages: list[dict], *, reason: str) -> SaveResult:
    conversation_id, version, stored_count, stored_size, stored_digest = header
    copy = process_copies.get(key)
    if copy is not None and (copy.conversation_id, copy.version) != (conversation_id, version):
        copy = None
    if copy is not None and len(copy.messages) == stored_count:
        kept = common_prefix(messages, copy.messages, stored_count)
    else:
        copy = None
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT hash FROM {ROWS} WHERE conversation_id = %s ORDER BY position", [conversation_id])
            kept = _common_prefix_by_hash(messages, [bytes(row[0]) for row in cursor.fetchall()])
    if kept == len(messages) == stored_count:
        # Nothing changed: no write, no version bump, no event (an idempotent replay announces nothing).
        return SaveResult(key, False, stored_count, kept, 0, 0, version, stored_digest, size_bytes=stored_size)
    validate_suffix(messages, kept)
    removed = stored_count - kept

    with connection.cursor() as cursor:
        if kept == stored_count:
            previous = bytes.fromhex(stored_digest)
        elif kept == 0:
            previous = EMPTY_CHAIN
        else:
            cursor.execute(
                f"SELECT chain FROM {ROWS} WHERE conversation_id = %s AND position = %s", [conversation_id, kept - 1]
            )
            previous = bytes(cursor.fetchone()[0])
        rows = NewRows.after(messages, kept, previous)  # raises before anything is written
        removed_size = 0
        if removed:
            cursor.execute(
                f"WITH gone AS (DELETE FROM {ROWS} WHERE conversation_id = %s AND position >= %s "
                "RETURNING size_bytes) "
                "SELECT coalesce(sum(size_bytes), 0) FROM gone",
                [conversation_id, kept],
            )
            removed_size = cursor.fetchone()[0]
        count, digest, size = len(messages), rows.digest, stored_size - removed_size + rows.size
        header_update = (
            f"UPDATE {HEADER} SET message_count = %s, size_bytes = %s, version = version + 1, digest = %s, "
            "updated_at = now() WHERE id = %s"
        )
        header_params = [count, size, digest, conversation_id]
        starts = list(range(0, len(rows.texts), INSERT_CHUNK))
        if not starts:
            cursor.execute(header_update, header_params)
        for first in starts:
            chunk = range(first, min(first + INSERT_CHUNK, len(rows.texts)))
            values = ", ".join(["(%s, %s, %s, %s::json, %s, %s, %s)"] * len(chunk))
            params: list = []
            for i in chunk:
                params += [conversation_id, *rows.values(i)]
            insert = (
                f"INSERT INTO {ROWS} (conversation_id, position, role, data, hash, chain, size_bytes) VALUES {values}"
            )
            if first == starts[-1]:
                # The last insert and the header update travel as one statement: one round trip fewer per turn.
                cursor.execute(f"WITH inserted AS ({insert}) {header_update}", params + header_params)
            else:
                cursor.execute(insert, params)
    new_version = version + 1

    if copy is not None:
        entry = ProcessCopy(conversation_id, new_version, copy.messages[:kept] + rows.parsed(), size, digest)
        # Only a committed state may be trusted as "what is stored".
        transaction.on_commit(lambda: process_copies.put(key, entry))
    else:
        process_copies.drop(key)
    announce_change_on_commit(
        ConversationChange(key.workflow_id, key.generation, key.agent_node_id, count, new_version, reason)
    )
    return SaveResult(key, True, count, kept, len(rows.texts), removed, new_version, digest, size_bytes=size)


def write_rows_locked(key: ConversationKey, header: tuple, rows: NewRows, count: int, *, reason: str) -> SaveResult:
    """Insert `rows` after the locked header's list (which has exactly `rows.start` messages)."""
    conversation_id, version, _stored_count, stored_size, _digest = header
    with connection.cursor() as cursor:
        for first in range(0, len(rows.texts), INSERT_CHUNK):
            chunk = range(first, min(first + INSERT_CHUNK, len(rows.texts)))
            values = ", ".join(["(%s, %s, %s, %s::json, %s, %s, %s)"] * len(chunk))
            params: list = []
            for i in chunk:
                params += [conversation_id, *rows.values(i)]
            cursor.execute(
                f"INSERT INTO {ROWS} (conversation_id, position, role, data, hash, chain, size_bytes) VALUES {values}",
                params,
            )
        size = stored_size + rows.size
        cursor.execute(
            f"UPDATE {HEADER} SET message_count = %s, size_bytes = %s, version = version + 1, digest = %s, "
            "updated_at = now() WHERE id = %s",
            [count, size, rows.digest, conversation_id],
        )
    new_version = version + 1
    process_copies.drop(key)
    announce_change_on_commit(
        ConversationChange(key.workflow_id, key.generation, key.agent_node_id, count, new_version, reason)
    )
    return SaveResult(key, True, count, rows.start, len(rows.texts), 0, new_version, rows.digest, size_bytes=size)
