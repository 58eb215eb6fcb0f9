"""Per-key serialization of firings (docs/invariants.md#one-firing-per-conversation).

A firing holds its conversation's lease across its steps (prepare, LLM step, tools, persist), which span several
Celery tasks and transactions, so a row lock cannot do it. The lease is a row claimed with one conditional upsert:
free or expired leases are taken, live ones are not. Times are the database's `now()`, so workers' clocks never
disagree about expiry. Acquiring never blocks: a Celery task that loses re-queues itself with a countdown.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection

from conversations.models import FiringLease, RetainedConversation
from core.statements import with_clauses

from .errors import FiringLeaseBusy
from .keys import ConversationKey

_LEASES = FiringLease._meta.db_table
_RETAINED = RetainedConversation._meta.db_table


def _ttl(ttl_seconds: int | None) -> int:
    return int(settings.FIRING_LEASE_TTL_SECONDS if ttl_seconds is None else ttl_seconds)


def acquire_firing_lease(key: ConversationKey, *, owner_token: str, ttl_seconds: int | None = None) -> bool:
    """Take the lease if it is free, expired, or already ours (re-acquiring renews). Never waits."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_LEASES} (workflow_id, generation, agent_node_id, owner_token, acquired_at, expires_at) "
            "VALUES (%s, %s, %s, %s, now(), now() + make_interval(secs => %s)) "
            "ON CONFLICT (workflow_id, generation, agent_node_id) DO UPDATE SET "
            "owner_token = EXCLUDED.owner_token, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at "
            f"WHERE {_LEASES}.expires_at <= now() OR {_LEASES}.owner_token = EXCLUDED.owner_token "
            "RETURNING owner_token",
            [key.workflow_id, key.generation, key.agent_node_id, owner_token, _ttl(ttl_seconds)],
        )
        return cursor.fetchone() is not None


def renew_firing_lease(key: ConversationKey, *, owner_token: str, ttl_seconds: int | None = None) -> bool:
    """Extend our lease. False when it expired and someone else took it: the firing must stop writing."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {_LEASES} SET expires_at = now() + make_interval(secs => %s) "
            "WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s AND owner_token = %s",
            [_ttl(ttl_seconds), key.workflow_id, key.generation, key.agent_node_id, owner_token],
        )
        return cursor.rowcount == 1


def release_firing_lease(key: ConversationKey, *, owner_token: str) -> bool:
    """Release the caller's own lease; the stored lists kept for it (retained.py) go with it, in the same
    statement."""
    clauses, params = with_clauses(release_firing_lease_statements(key, owner_token=owner_token))
    with connection.cursor() as cursor:
        cursor.execute(f"{clauses} SELECT count(*) FROM lease_released", params)
        return cursor.fetchone()[0] == 1


def release_firing_lease_statements(key: ConversationKey, *, owner_token: str) -> list[tuple[str, str, list]]:
    """`release_firing_lease` as named statements `(name, sql, params)` for a caller that sends them as WITH clauses
    of a write it makes anyway (the runtime ends a firing with one UPDATE of its row): one round trip fewer."""
    return [
        (
            "lease_released",
            f"DELETE FROM {_LEASES} WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s "
            "AND owner_token = %s RETURNING 1",
            [key.workflow_id, key.generation, key.agent_node_id, owner_token],
        ),
        (
            "retained_dropped",
            f"DELETE FROM {_RETAINED} WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s "
            "AND EXISTS (SELECT 1 FROM lease_released)",
            [key.workflow_id, key.generation, key.agent_node_id],
        ),
    ]


def firing_lease_holder(key: ConversationKey) -> str | None:
    """The token of the live lease on `key`, if any."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT owner_token FROM {_LEASES} WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s "
            "AND expires_at > now()",
            [key.workflow_id, key.generation, key.agent_node_id],
        )
        row = cursor.fetchone()
    return row[0] if row else None


@contextmanager
def firing_lease(
    key: ConversationKey,
    *,
    owner_token: str,
    ttl_seconds: int | None = None,
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.05,
) -> Iterator[str]:
    """Hold the lease for the block (in-process firings). Waits up to `wait_seconds`, then raises FiringLeaseBusy.

    Must not be entered inside a transaction that holds row locks: waiting here while holding them could block
    the lease holder.
    """
    deadline = time.monotonic() + wait_seconds
    while not acquire_firing_lease(key, owner_token=owner_token, ttl_seconds=ttl_seconds):
        if time.monotonic() >= deadline:
            raise FiringLeaseBusy(message="Another firing of this conversation is in progress.", extra=key.as_log())
        time.sleep(poll_seconds)
    try:
        yield owner_token
    finally:
        release_firing_lease(key, owner_token=owner_token)
