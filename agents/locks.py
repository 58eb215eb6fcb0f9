"""Row locks of the runtime. Every `select_for_update` of a firing or a step goes through here.

Place in the lock order (docs/architecture.md#lock-order): the firing row is **2**, after the workflow row and
before any chat row, tool row or conversation header; a step row (`LlmStep`) is taken only under its firing's lock.
The firing lease (`conversations_firinglease`) comes after the firing (**2a**).

Firings are locked `FOR NO KEY UPDATE` (`no_key=True`): their child rows (steps, tool results, teammates' firings)
only reference the firing, so inserting one need not wait for a step that holds it; nobody changes a firing's key.
"""

from __future__ import annotations

import functools

from django.db import connection, transaction

from workflows.models import Workflow

from .models import Firing, LlmStep
from .rows import columns_of, instance_of, select_columns


def firing_for_update(firing_id, *, with_workflow: bool = False, state: str | None = None) -> Firing | None:
    """The firing row, locked for this transaction (None if it does not exist, or is not in `state`).

    `with_workflow` reads the workflow (its owner and ids, not its draft graph, which only a test run on generation
    0 reads, and then loads on its own) in the same query but locks the firing alone (`OF` the firing): locking the
    joined workflow row too would serialize every firing of a workflow and take a workflow row after a firing.
    Every step starts here, so the statement is built once per process (agents/rows.py)."""
    with connection.cursor() as cursor:
        cursor.execute(_firing_sql(with_workflow, state is not None), [firing_id, *([state] if state else [])])
        row = cursor.fetchone()
    return None if row is None else _firing_of(row, with_workflow)


def firing_and_step_for_update(firing_id, iteration: int) -> tuple[Firing, LlmStep] | None:
    """The firing (with its workflow, as `firing_for_update(with_workflow=True)`) and its step `iteration`, both
    locked by one statement, the firing first (the rows of `FOR ... OF f, s` are locked in that order); None when
    either does not exist. What persist decides under (lock order 2, then its step)."""
    with connection.cursor() as cursor:
        cursor.execute(_firing_and_step_sql(), [iteration, firing_id])
        row = cursor.fetchone()
    if row is None:
        return None
    firing = _firing_of(row, True)
    step = instance_of(LlmStep, row[-len(columns_of(LlmStep)) :])
    LlmStep.firing.field.set_cached_value(step, firing)
    return firing, step


_WORKFLOW_LEFT_OUT = ("graph", "node_numbers")


def _firing_of(row, with_workflow: bool) -> Firing:
    count = len(columns_of(Firing))
    firing = instance_of(Firing, row[:count])
    if with_workflow:
        workflow_count = len(columns_of(Workflow, _WORKFLOW_LEFT_OUT))
        workflow = instance_of(Workflow, row[count : count + workflow_count], leave_out=_WORKFLOW_LEFT_OUT)
        Firing.workflow.field.set_cached_value(firing, workflow)
    return firing


# Columns are named by their tables (as the ORM names them), so what a blocked step waits on reads the same in
# pg_stat_activity (`SELECT "agents_firing"...`) whichever helper sent it.
_F, _W, _S = (f'"{model._meta.db_table}"' for model in (Firing, Workflow, LlmStep))


@functools.cache
def _firing_sql(with_workflow: bool, with_state: bool) -> str:
    columns = select_columns(Firing, _F)
    join = ""
    if with_workflow:
        columns += ", " + select_columns(Workflow, _W, leave_out=_WORKFLOW_LEFT_OUT)
        join = f' JOIN {_W} ON {_W}."id" = {_F}."workflow_id"'
    state = f' AND {_F}."state" = %s' if with_state else ""
    return f'SELECT {columns} FROM {_F}{join} WHERE {_F}."id" = %s{state} FOR NO KEY UPDATE OF {_F}'


@functools.cache
def _firing_and_step_sql() -> str:
    columns = ", ".join(
        [
            select_columns(Firing, _F),
            select_columns(Workflow, _W, leave_out=_WORKFLOW_LEFT_OUT),
            select_columns(LlmStep, _S),
        ]
    )
    return (
        f'SELECT {columns} FROM {_F} JOIN {_W} ON {_W}."id" = {_F}."workflow_id" '
        f'JOIN {_S} ON {_S}."firing_id" = {_F}."id" AND {_S}."iteration" = %s '
        f'WHERE {_F}."id" = %s FOR NO KEY UPDATE OF {_F}, {_S}'
    )


def firings_live_for_update(*, workflow_id) -> list[Firing]:
    """Every firing of the workflow that has not ended, locked in creation order (Workflow Reset, under the
    workflow row's lock: the one place that locks several firings, always in this order)."""
    rows = Firing.objects.select_for_update(no_key=True).filter(workflow_id=workflow_id)
    return list(rows.exclude(state__in=Firing.TERMINAL_STATES).order_by("created_at", "pk"))


def llm_step_claim_if_firing_unchanged(
    *, firing_id, iteration: int, worker: str, now, also_return: tuple[str, list] = ("true", [])
) -> tuple | None:
    """Insert step `iteration` as started in one statement that locks the firing row, only while the firing is
    running at `iteration - 1` with no compaction pending and no Stop; (the new step's id, `also_return`'s value),
    or None (the condition failed, or the step was claimed already). `also_return`: an SQL expression and its
    params read in the same statement (the spending-limit check's "may any limit apply", agents/services/budget.py).

    The statement waits for a reset or Stop in progress and then sees it. It runs in its own transaction, not in
    autocommit: a claim waiting on the lock when its worker dies must not be committed by the orphaned backend
    once the lock frees (that would leave a step nobody calls for)."""
    extra_sql, extra_params = also_return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {LlmStep._meta.db_table} "
            "(firing_id, iteration, state, worker, error_code, started_at, heartbeat_at) "
            f"SELECT id, %s, %s, %s, '', %s, %s FROM {Firing._meta.db_table} "
            "WHERE id = %s AND state = %s AND iteration = %s AND NOT compaction_pending AND NOT stop_requested "
            f"FOR NO KEY UPDATE ON CONFLICT (firing_id, iteration) DO NOTHING RETURNING id, {extra_sql}",
            [iteration, LlmStep.State.STARTED, worker, now, now, firing_id, Firing.State.RUNNING, iteration - 1]
            + extra_params,
        )
        row = cursor.fetchone()
    return row
