"""Row locks of the triggers. Every `select_for_update` of a triggers row goes through here.

Place in the lock order (docs/architecture.md#lock-order): **1a**, a schedule row, right after the workflow row.
Start, Stop and Reset change a workflow's schedules under the workflow's lock. The sweep takes due schedules alone,
skipping rows another sweep holds, and under them inserts fires (which reference only the schedule), so it never
waits for a workflow row while it holds a schedule.
"""

from __future__ import annotations

from .models import Schedule


def schedules_due_for_update(*, now, limit: int) -> list[Schedule]:
    """Due schedules, locked (lock 1a) `SKIP LOCKED`: two sweeps at once claim disjoint rows, and a row one of
    them moved forward is not due for the other."""
    rows = (
        Schedule.objects.select_for_update(no_key=True, skip_locked=True)
        .filter(next_due_at__isnull=False, next_due_at__lte=now)
        .order_by("next_due_at")
    )
    return list(rows[:limit])


def schedules_of_workflow_for_update(*, workflow_id: int) -> list[Schedule]:
    """A workflow's schedules, locked (lock 1a) in id order, under the workflow's row lock (Start, Stop, Reset)."""
    return list(Schedule.objects.select_for_update(no_key=True).filter(workflow_id=workflow_id).order_by("pk"))
