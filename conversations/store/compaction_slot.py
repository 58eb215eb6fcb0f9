"""The one compaction slot of a conversation (docs/invariants.md#compaction): claimed by the turn that finds the
conversation over its threshold, so a burst of turns pays for one summary; waited on by a firing whose next request
needs the compaction; `ready` when a summary could not land at once because a firing held the key's lease (that
firing lands it). Every write here is one conditional statement; the locked reads are in `locks.py`."""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from conversations.models import ConversationCompaction

from .keys import ConversationKey

SLOT = ConversationCompaction._meta.db_table
_KEY = "workflow_id = %s AND generation = %s AND agent_node_id = %s"


def _key_params(key: ConversationKey) -> list:
    return [key.workflow_id, key.generation, key.agent_node_id]


def _lost_after() -> int:
    return int(settings.AGENT_STEP_LOST_AFTER_SECONDS)


def compaction_claim(key: ConversationKey, *, waiting_firing_id=None, waiting_iteration: int = 0) -> bool:
    """Take the slot for a new summary: when it is idle, or running but silent for longer than a lost worker takes
    to be noticed. False when a summary is running or waits to land (the caller queues nothing)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {SLOT} AS s (workflow_id, generation, agent_node_id, state, started_at, beat_at, "
            "waiting_firing_id, waiting_iteration, prefix_conversation_id, prefix_length, prefix_chain, summary, "
            "summaries, landed, discarded, last_outcome) "
            "VALUES (%s, %s, %s, 'running', now(), now(), %s, %s, NULL, 0, '', '', 0, 0, 0, '') "
            "ON CONFLICT (workflow_id, generation, agent_node_id) DO UPDATE SET state = 'running', "
            "started_at = now(), beat_at = now(), waiting_firing_id = EXCLUDED.waiting_firing_id, "
            "waiting_iteration = EXCLUDED.waiting_iteration, summary = '' "
            "WHERE s.state = 'idle' OR (s.state = 'running' AND s.beat_at < now() - make_interval(secs => %s)) "
            "RETURNING 1",
            [*_key_params(key), waiting_firing_id, waiting_iteration, _lost_after()],
        )
        return cursor.fetchone() is not None


def compaction_wait(key: ConversationKey, *, firing_id, iteration: int) -> bool:
    """Make `firing_id` the firing the running summary continues (at `iteration`) once it lands. False when no live
    summary is running (nothing to wait for)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SLOT} SET waiting_firing_id = %s, waiting_iteration = %s WHERE {_KEY} AND state = 'running' "
            "AND beat_at >= now() - make_interval(secs => %s)",
            [firing_id, iteration, *_key_params(key), _lost_after()],
        )
        return cursor.rowcount == 1


def compaction_waiter(key: ConversationKey) -> tuple[str, int] | None:
    """(id, next iteration) of the firing that waits for the running compaction, if one does (read unlocked: the
    lander locks that firing, then the slot, and checks again)."""
    row = (
        ConversationCompaction.objects.filter(
            workflow_id=key.workflow_id, generation=key.generation, agent_node_id=key.agent_node_id
        )
        .values_list("waiting_firing_id", "waiting_iteration")
        .first()
    )
    return (str(row[0]), int(row[1])) if row and row[0] else None


def compaction_beat(key: ConversationKey):
    """The running summary is alive; returns the id of the firing that waits for it, if any."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SLOT} SET beat_at = now() WHERE {_KEY} AND state = 'running' RETURNING waiting_firing_id",
            _key_params(key),
        )
        row = cursor.fetchone()
    return row[0] if row else None


def compaction_ready(key: ConversationKey, *, identity, summary: str) -> None:
    """The summary is paid for and waits for the lease holder to land it (under the slot's lock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SLOT} SET state = 'ready', waiting_firing_id = NULL, prefix_conversation_id = %s, "
            f"prefix_length = %s, prefix_chain = %s, summary = %s, summaries = summaries + 1 WHERE {_KEY}",
            [identity.conversation_id, identity.length, identity.chain, summary, *_key_params(key)],
        )


def compaction_finish(key: ConversationKey, *, outcome: str, paid: bool) -> None:
    """Free the slot, counting what happened (`landed`, `discarded`, or a summary that was not made or failed)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SLOT} SET state = 'idle', waiting_firing_id = NULL, waiting_iteration = 0, summary = '', "
            "summaries = summaries + %s, landed = landed + %s, discarded = discarded + %s, "
            "last_landed_at = CASE WHEN %s THEN now() ELSE last_landed_at END, last_outcome = %s "
            f"WHERE {_KEY}",
            [
                int(paid),
                int(outcome == "landed"),
                int(outcome == "discarded"),
                outcome == "landed",
                outcome,
                *_key_params(key),
            ],
        )


def compaction_release_unawaited(key: ConversationKey, *, firing_id) -> None:
    """Free a running slot claimed for `firing_id` whose compaction task came after that firing stopped waiting
    (the watchdog continued it, or it ended): nothing was summarised, the next turn may claim at once."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SLOT} SET state = 'idle', waiting_firing_id = NULL, waiting_iteration = 0, last_outcome = "
            f"'unawaited' WHERE {_KEY} AND state = 'running' AND waiting_firing_id = %s",
            [*_key_params(key), firing_id],
        )


def compaction_status(key: ConversationKey) -> dict:
    """What the Context panel shows: a compaction in progress, when the last one landed, summaries paid for."""
    row = (
        ConversationCompaction.objects.filter(
            workflow_id=key.workflow_id, generation=key.generation, agent_node_id=key.agent_node_id
        )
        .values("state", "started_at", "summaries", "landed", "discarded", "last_landed_at", "last_outcome")
        .first()
    )
    if row is None:
        return {"in_progress": False, "started_at": None, "summaries": 0, "landed": 0, "discarded": 0,
                "last_landed_at": None, "last_outcome": ""}  # fmt: skip
    return {"in_progress": row.pop("state") != "idle", **row}
