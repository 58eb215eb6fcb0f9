"""Row locks of the conversation store. Every `FOR UPDATE` of a conversation header is taken here.

Place in the lock order (docs/architecture.md#lock-order): conversation headers are **7**, after the workflow,
firing, chat and tool rows, several of them always in ascending key order (`ConversationKey` sorts in byte order,
PostgreSQL's `COLLATE "C"`); message rows (**8**) are written only by the holder of their header's lock and
need no lock of their own. Headers are locked `FOR UPDATE`: a clear deletes them under the lock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

from conversations.models import EMPTY_DIGEST, ConversationCompaction

from .keys import ConversationKey
from .results import HEADER, LockedConversation


def conversation_header_for_update(key: ConversationKey, *, create: bool) -> tuple | None:
    """Lock the conversation's header row (creating it when asked). Every write of its messages holds this lock."""
    select = (
        f"SELECT id, version, message_count, size_bytes, digest FROM {HEADER} "
        "WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s FOR UPDATE"
    )
    params = [key.workflow_id, key.generation, key.agent_node_id]
    with connection.cursor() as cursor:
        cursor.execute(select, params)
        row = cursor.fetchone()
        if row is None and create:
            # ON CONFLICT: a concurrent creator wins the insert and we wait for its lock instead of failing.
            cursor.execute(
                f"INSERT INTO {HEADER} (workflow_id, generation, agent_node_id, message_count, size_bytes, version, "
                "digest, created_at, updated_at) VALUES (%s, %s, %s, 0, 0, 0, %s, now(), now()) "
                "ON CONFLICT (workflow_id, generation, agent_node_id) DO NOTHING",
                [*params, EMPTY_DIGEST],
            )
            cursor.execute(select, params)
            row = cursor.fetchone()
    return row


def conversation_headers_for_update(*, where: list[str], params: list) -> list[tuple]:
    """(id, generation, agent_node_id) of the headers matching `where` (SQL conditions on the header's key columns,
    built by the store, never by a caller), locked in the fixed key order so a clear never deadlocks a branch
    move: byte order, as Python sorts `ConversationKey`s."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, generation, agent_node_id FROM {HEADER} WHERE {' AND '.join(where)} "
            'ORDER BY generation, agent_node_id COLLATE "C" FOR UPDATE',
            params,
        )
        return cursor.fetchall()


@contextmanager
def lock_conversations(keys) -> Iterator[dict[ConversationKey, LockedConversation]]:
    """Lock the header rows of `keys` in the fixed order (ascending key), creating missing ones, for one
    transaction. Yields `{key: LockedConversation}`; use replace_conversation_locked inside."""
    ordered = sorted(set(keys))
    with transaction.atomic():
        locked = {}
        for key in ordered:
            row = conversation_header_for_update(key, create=True)
            locked[key] = LockedConversation(key, row[0], row[1], row[2], row[4])
        yield locked


def compaction_slot_for_update(key: ConversationKey) -> tuple | None:
    """Lock a conversation's compaction slot (docs/architecture.md#lock-order: after the firing and its lease,
    before the conversation's header). (state, waiting_firing_id, waiting_iteration, prefix_conversation_id,
    prefix_length, prefix_chain, summary), or None when the key never had a compaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, waiting_firing_id, waiting_iteration, prefix_conversation_id, prefix_length, prefix_chain, "
            f"summary FROM {ConversationCompaction._meta.db_table} "
            "WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s FOR UPDATE",
            [key.workflow_id, key.generation, key.agent_node_id],
        )
        return cursor.fetchone()
