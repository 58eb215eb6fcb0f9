"""Row locks of workflows. Every `select_for_update` of a workflows row goes through here.

Place in the lock order (docs/architecture.md#lock-order): the workflow row is **1**, first of all; a todo item is
a tool row (**6**), taken under its firing's lock after the list's advisory lock (`todos:<workflow>:<node>`).

The workflow row is locked `FOR UPDATE`, not `FOR NO KEY UPDATE`, on purpose: a firing, a generation or any other
row that references the workflow then waits (its foreign-key check) until a save, Start or Reset commits, so no
firing of the old generation is inserted behind a Reset's back.
"""

from __future__ import annotations

from .models import TodoItem, Workflow


def workflow_for_update(workflow_id) -> Workflow:
    """The workflow row, locked (lock 1). Every writer of a workflow takes it first: saves, starts, resets."""
    return Workflow.objects.select_for_update().get(pk=workflow_id)


def todo_item_for_update(*, workflow, node_id: str, item_id: int) -> TodoItem | None:
    """One item of a todos list, locked (lock 6) for an edit or a removal (hence `FOR UPDATE`)."""
    return TodoItem.objects.select_for_update().filter(workflow=workflow, node_id=node_id, pk=item_id).first()
