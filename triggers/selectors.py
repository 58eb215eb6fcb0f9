"""Reads of the triggers."""

from __future__ import annotations

import functools

from django.db import connection

from agents.rows import instance_of, select_columns
from workflows.models import Workflow, WorkflowGeneration

from .models import Webhook


def webhook_address_state(*, workflow, node_id: str) -> dict:
    hook = Webhook.objects.filter(workflow=workflow, node_id=node_id).first()
    return {"exists": hook is not None, "hint": hook.hint if hook else "", "url": None}


# Built once per process: the ORM spent more building this read than PostgreSQL running it (bench/triggers.py).
# The workflow's draft graph is left out (loaded if something asks for it); the live generation's graph comes
# along, NULL when the workflow runs no generation (never started, stopped, reset).
@functools.cache
def _live_hook_sql() -> str:
    generation = WorkflowGeneration._meta.db_table
    return f"""
SELECT {select_columns(Webhook, "h")}, {select_columns(Workflow, "w", leave_out=("graph",))}, g.graph
  FROM {Webhook._meta.db_table} AS h
  JOIN {Workflow._meta.db_table} AS w ON w.id = h.workflow_id
  LEFT JOIN {generation} AS g
         ON g.workflow_id = w.id AND g.number = w.live_generation AND g.state = '{WorkflowGeneration.State.LIVE}'
 WHERE h.token_hash = %s
"""


def webhook_with_live_graph(*, token_hash: str) -> tuple[Webhook | None, dict | None]:
    """The hook with this address digest (its `workflow` loaded) and the graph its workflow runs live (None when
    it runs none); (None, None) for an unknown address. One query."""
    with connection.cursor() as cursor:
        cursor.execute(_live_hook_sql(), [token_hash])
        row = cursor.fetchone()
    if row is None:
        return None, None
    width = len(Webhook._meta.concrete_fields)
    hook = instance_of(Webhook, row[:width])
    hook.workflow = instance_of(Workflow, row[width:-1], leave_out=("graph",))
    graph = WorkflowGeneration._meta.get_field("graph").from_db_value(row[-1], None, connection)
    return hook, graph if isinstance(graph, dict) else None
