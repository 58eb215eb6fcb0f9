"""Row locks of the runtime. Every `select_for_update` of a firing or a step goes through here.

Place in the lock order (docs/architecture.md#lock-order): the firing row is **2**, after the workflow row and
before any chat row, tool row or conversation header; a step row (`LlmStep`) is taken only under its firing's lock.
The firing lease (`conversations_firinglease`) comes after the firing (**2a**).

Firings are locked `FOR NO KEY UPDATE` (`no_key=True`): their child rows (steps, tool results, teammates' firings)
only reference the firing, so inserting one need not wait for a step that holds it; nobody changes a firing's key.
"""

from __future__ import annotations

from django.db import connection, transaction

from .models import Firing, LlmStep


def firing_for_update(firing_id, *, with_workflow: bool = False, state: str | None = None) -> Firing | None:
    """The firing row, locked for this transaction (None if it does not exist, or is not in `state`).

    `with_workflow` reads the workflow (its owner and ids, not its draft graph, which only a test run on generation
    0 reads, and then loads on its own) in the same query but locks the firing alone (`of=("self",)`): locking the
    joined workflow row too would serialize every firing of a workflow and take a workflow row after a firing."""
    rows = Firing.objects.select_for_update(of=("self",), no_key=True)
    if with_workflow:
        rows = rows.select_related("workflow").defer("workflow__graph", "workflow__node_numbers")
    rows = rows.filter(pk=firing_id)
    if state is not None:
        rows = rows.filter(state=state)
    return rows.first()


def firings_live_for_update(*, workflow_id) -> list[Firing]:
    """Every firing of the workflow that has not ended, locked in creation order (Workflow Reset, under the
    workflow row's lock: the one place that locks several firings, always in this order)."""
    rows = Firing.objects.select_for_update(no_key=True).filter(workflow_id=workflow_id)
    return list(rows.exclude(state__in=Firing.TERMINAL_STATES).order_by("created_at", "pk"))


def llm_step_for_update(*, firing, iteration: int) -> LlmStep | None:
    """Step `iteration` of a firing whose row lock the caller already holds (persist decides under both)."""
    return LlmStep.objects.select_for_update(no_key=True).filter(firing=firing, iteration=iteration).first()


def llm_step_claim_if_firing_unchanged(*, firing_id, iteration: int, worker: str, now) -> int | None:
    """Insert step `iteration` as started in one statement that locks the firing row, only while the firing is
    running at `iteration - 1` with no compaction pending and no Stop; the new step's id, or None (the condition
    failed, or the step was claimed already).

    The statement waits for a reset or Stop in progress and then sees it. It runs in its own transaction, not in
    autocommit: a claim waiting on the lock when its worker dies must not be committed by the orphaned backend
    once the lock frees (that would leave a step nobody calls for)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {LlmStep._meta.db_table} "
            "(firing_id, iteration, state, worker, error_code, started_at, heartbeat_at) "
            f"SELECT id, %s, %s, %s, '', %s, %s FROM {Firing._meta.db_table} "
            "WHERE id = %s AND state = %s AND iteration = %s AND NOT compaction_pending AND NOT stop_requested "
            "FOR NO KEY UPDATE ON CONFLICT (firing_id, iteration) DO NOTHING RETURNING id",
            [iteration, LlmStep.State.STARTED, worker, now, now, firing_id, Firing.State.RUNNING, iteration - 1],
        )
        row = cursor.fetchone()
    return row[0] if row is not None else None
