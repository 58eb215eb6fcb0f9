"""Row locks of the runtime. Every `select_for_update` of a firing or a step goes through here.

Place in the lock order (docs/architecture.md#lock-order): the firing row is **2**, after the workflow row and
before any chat row, tool row or conversation header; a step row (`LlmStep`) is taken only under its firing's lock.
The firing lease (`conversations_firinglease`) comes after the firing (**2a**).

Firings are locked `FOR NO KEY UPDATE` (`no_key=True`): their child rows (steps, tool results, teammates' firings)
only reference the firing, so inserting one need not wait for a step that holds it; nobody changes a firing's key.
"""

from __future__ import annotations

from .models import Firing, LlmStep


def firing_for_update(firing_id, *, with_workflow: bool = False, state: str | None = None) -> Firing | None:
    """The firing row, locked for this transaction (None if it does not exist, or is not in `state`).

    `with_workflow` reads the workflow in the same query but locks the firing alone (`of=("self",)`): locking the
    joined workflow row too would serialize every firing of a workflow and take a workflow row after a firing."""
    rows = Firing.objects.select_for_update(of=("self",), no_key=True)
    if with_workflow:
        rows = rows.select_related("workflow")
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
