"""Clear: delete stored conversations in key order under their header locks; a lease holder keeps what it was
extending (docs/invariants.md#store-observes), and what a result clearing may still free is read from the rows."""

from __future__ import annotations

from django.db import connection, transaction

from conversations.events import ConversationChange, announce_change_on_commit

from .copies import process_copies
from .keys import ConversationKey
from .locks import conversation_headers_for_update
from .results import HEADER, ROWS, StoredPrefix
from .retained import retain_for_lease_holders


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
        rows = conversation_headers_for_update(where=where, params=params)
        if not rows:
            return 0
        ids = [row[0] for row in rows]
        retain_for_lease_holders(ids)
        cursor.execute(f"DELETE FROM {ROWS} WHERE conversation_id = ANY(%s)", [ids])
        cursor.execute(f"DELETE FROM {HEADER} WHERE id = ANY(%s)", [ids])
        # A runtime session continuing a cleared conversation would remember what the owner cleared.
        cursor.execute(f"DELETE FROM conversations_runtimesessionbinding WHERE {' AND '.join(where)}", params)
        cursor.execute(f"DELETE FROM conversations_runtimeinteractionpoint WHERE {' AND '.join(where)}", params)
        for _, gen, node in rows:
            key = ConversationKey(workflow_id, gen, node)
            process_copies.drop(key)
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
            f"WITH c AS (SELECT id FROM {HEADER} WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s "
            "AND version = %s AND digest = %s), "
            f"latest AS (SELECT coalesce(max(m.position), 0) AS start FROM {ROWS} m, c WHERE m.conversation_id = c.id "
            "AND m.role = 'user' AND coalesce(m.data->'meta'->>'compaction_summary', '') <> 'true') "
            f"SELECT CASE WHEN EXISTS (SELECT 1 FROM {ROWS} m, c, latest WHERE m.conversation_id = c.id "
            "AND m.role = 'tool' AND m.position < latest.start AND coalesce(m.data->'meta'->>'cleared', '') <> 'true') "
            f"THEN (SELECT array_agg(m.size_bytes ORDER BY m.position) FROM {ROWS} m, c "
            "WHERE m.conversation_id = c.id) END",
            [key.workflow_id, key.generation, key.agent_node_id, prefix.version, prefix.digest],
        )
        row = cursor.fetchone()
    sizes = row[0] if row else None
    return list(sizes) if sizes and len(sizes) == prefix.length else None
