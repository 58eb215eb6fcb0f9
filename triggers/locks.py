"""Row locks of the triggers. Every `select_for_update` of a triggers row goes through here.

Place in the lock order (docs/architecture.md#lock-order): **1a**, a schedule row, right after the workflow row.
Start, Stop and Reset change a workflow's schedules under the workflow's lock. The sweep takes due schedules alone,
skipping rows another sweep holds, and under them inserts fires (which reference only the schedule), so it never
waits for a workflow row while it holds a schedule.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from django.db import connection

from .models import Schedule, TriggerFire


class DueSchedule(NamedTuple):
    """A claimed schedule: what the sweep needs of it, and how many of its fires still wait for delivery."""

    pk: int
    workflow_id: int
    node_id: str
    name: str
    cron: str
    every_minutes: int | None
    timezone: str
    message: str
    anchor_at: datetime
    next_due_at: datetime
    pending: int


# One statement: the claim and each claimed row's pending fires (a count through the fires' schedule index), only
# the columns the sweep reads. The ORM spent more on building the query and its model rows than PostgreSQL on
# running it (bench/triggers.py).
_DUE_FOR_UPDATE = f"""
WITH due AS (
    SELECT id, workflow_id, node_id, name, cron, every_minutes, timezone, message, anchor_at, next_due_at
      FROM {Schedule._meta.db_table}
     WHERE next_due_at IS NOT NULL AND next_due_at <= %s
     ORDER BY next_due_at
     LIMIT %s
       FOR NO KEY UPDATE SKIP LOCKED
)
SELECT due.*,
       (SELECT count(*) FROM {TriggerFire._meta.db_table} AS f
         WHERE f.schedule_id = due.id AND f.state IN ('{TriggerFire.State.QUEUED}', '{TriggerFire.State.WAITING}'))
  FROM due
"""


def schedules_due_for_update(*, now, limit: int) -> list[DueSchedule]:
    """Due schedules, locked (lock 1a) `SKIP LOCKED`: two sweeps at once claim disjoint rows, and a row one of
    them moved forward is not due for the other. The caller must be in a transaction (the locks last until it
    ends)."""
    if not connection.in_atomic_block:
        raise RuntimeError("schedules_due_for_update locks rows: call it inside transaction.atomic()")
    with connection.cursor() as cursor:
        cursor.execute(_DUE_FOR_UPDATE, [now, limit])
        return [DueSchedule(*row) for row in cursor.fetchall()]


def schedules_of_workflow_for_update(*, workflow_id: int) -> list[Schedule]:
    """A workflow's schedules, locked (lock 1a) in id order, under the workflow's row lock (Start, Stop, Reset)."""
    return list(Schedule.objects.select_for_update(no_key=True).filter(workflow_id=workflow_id).order_by("pk"))
