"""Copies of stored lists that were rewritten under a firing that holds their key's lease.

A firing keeps no copy of its conversation: its request is the stored list it extends (`StoredPrefix`) plus its
own unsaved messages. When the owner clears the Context, a branch move rewinds it, or a compaction replaces it
while that firing is mid-turn, the rows it extends are gone; the rewrite keeps them here (copied inside the
database, in the rewriting transaction) only when a lease on the key exists, so the firing still sends what it
was sending and saves nothing over the new list. Released with the lease; leftovers are pruned.
"""

from __future__ import annotations

import json

from django.db import connection

from conversations.models import AgentConversation, ConversationMessage, FiringLease, RetainedConversation
from providers.readonly import read_only

from .keys import ConversationKey

_HEADER = AgentConversation._meta.db_table
_ROWS = ConversationMessage._meta.db_table
_LEASES = FiringLease._meta.db_table
_RETAINED = RetainedConversation._meta.db_table


def retain_for_lease_holders(conversation_ids: list[int]) -> None:
    """Keep the current stored lists of the locked headers `conversation_ids` whose key a firing holds a lease on.

    Called under the header lock, before the rows are rewritten; one statement, nothing when no lease exists."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_RETAINED} (workflow_id, generation, agent_node_id, version, digest, message_count, "
            "messages, created_at) "
            "SELECT c.workflow_id, c.generation, c.agent_node_id, c.version, c.digest, c.message_count, "
            f"coalesce((SELECT json_agg(m.data ORDER BY m.position) FROM {_ROWS} m WHERE m.conversation_id = c.id), "
            "'[]'::json), now() "
            f"FROM {_HEADER} c WHERE c.id = ANY(%s) AND c.message_count > 0 AND EXISTS (SELECT 1 FROM {_LEASES} l "
            "WHERE l.workflow_id = c.workflow_id AND l.generation = c.generation "
            "AND l.agent_node_id = c.agent_node_id)",
            [list(conversation_ids)],
        )


def retained_messages(key: ConversationKey, prefix) -> list[dict] | None:
    """The retained list `prefix` (a StoredPrefix) names, read-only, or None."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT messages::text FROM {_RETAINED} WHERE workflow_id = %s AND generation = %s "
            "AND agent_node_id = %s AND version = %s AND digest = %s AND message_count = %s LIMIT 1",
            [key.workflow_id, key.generation, key.agent_node_id, prefix.version, prefix.digest, prefix.length],
        )
        row = cursor.fetchone()
    return None if row is None else read_only(json.loads(row[0]))


def prune_retained(*, older_than) -> int:
    return RetainedConversation.objects.filter(created_at__lt=older_than).delete()[0]
