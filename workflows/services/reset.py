"""Workflow Reset. It names no node type and no other app: it goes through the reset listeners
(workflows/listeners.py) and each node's NodeSpec `reset_execution_state` hook."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg
from django.conf import settings
from django.db import OperationalError, transaction
from django.utils import timezone

from core.errors import ConflictError
from core.realtime import publish_workflow_event

from ..events import workflow_reset_event
from ..graph import normalize_workflow_graph
from ..listeners import generation_start_listeners, reset_listeners
from ..locks import workflow_for_update
from ..models import Workflow, WorkflowGeneration
from ..nodes import ResetContext, get_node_spec
from .generations import live_generation_of, next_generation_number
from .prepare import EMPTY_GRAPH

logger = logging.getLogger(__name__)


@dataclass
class ResetOutcome:
    workflow: Workflow
    generation: WorkflowGeneration
    previous_generation: int
    report: dict
    replayed: bool = False


def workflow_reset(*, workflow: Workflow, actor=None, expected_generation: int | None = None) -> ResetOutcome:
    """Workflow Reset (docs/workflows.md#reset): reset listeners end live runs and clear conversations and the chat
    thread, every node's `reset_execution_state` hook applies its policy (memory `reset_policy`, todos), and a fresh
    generation is admitted. With `expected_generation`, a retried reset of that generation replays its result.

    The reset locks chat runs before firings, the reverse of a concurrent prepare, so PostgreSQL may abort it with
    a deadlock (docs/architecture.md#reset-deadlock). Each attempt runs in its own savepoint, so a deadlocked
    one leaves nothing behind and the next starts afresh (the repeated reset is idempotent); when every attempt
    deadlocks the caller gets 409 `reset_busy`, which says to try again."""
    for attempt in range(settings.WORKFLOW_RESET_DEADLOCK_RETRIES + 1):
        try:
            with transaction.atomic():
                return _reset_attempt(workflow=workflow, actor=actor, expected_generation=expected_generation)
        except OperationalError as exc:
            if not _is_deadlock(exc):
                raise
            logger.warning("workflow reset deadlocked", extra={"workflow_id": workflow.pk, "attempt": attempt + 1})
    raise ConflictError(
        "reset_busy",
        "The workflow was busy starting a step; nothing was reset. Try the reset again.",
        extra={"retry": True},
        headers={"Retry-After": "1"},
    )


def _is_deadlock(exc: BaseException) -> bool:
    seen = 0
    while exc is not None and seen < 5:  # Django wraps psycopg's error
        if isinstance(exc, psycopg.errors.DeadlockDetected):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _reset_attempt(*, workflow: Workflow, actor, expected_generation: int | None) -> ResetOutcome:
    locked = workflow_for_update(workflow.pk)
    previous = locked.live_generation
    if expected_generation is not None and expected_generation != previous:
        latest = WorkflowGeneration.objects.filter(workflow=locked, number=previous).first()
        if (
            latest is not None
            and latest.admitted_by == WorkflowGeneration.AdmittedBy.RESET
            and latest.reset_from == expected_generation
        ):
            return ResetOutcome(locked, latest, expected_generation, {"replayed": True}, replayed=True)
        raise ConflictError(
            "generation_conflict",
            "The workflow is no longer at that generation.",
            extra={"current_generation": previous},
        )
    live = live_generation_of(locked)
    new_number = next_generation_number(locked)
    policy_context = ResetContext(actor=actor, previous_generation=previous, new_generation=new_number)
    report: dict = {"listeners": {}, "nodes": {}}
    for name, listener in reset_listeners().items():
        report["listeners"][name] = listener(
            workflow=locked, previous_generation=previous, new_generation=new_number, actor=actor
        )
    for node in _reset_nodes(locked, live):
        spec = get_node_spec(node.get("type"))
        if spec is not None and spec.reset_execution_state is not None:
            report["nodes"][node["id"]] = spec.reset_execution_state(locked, node, policy_context=policy_context)
    now = timezone.now()
    if live is not None:
        live.state = WorkflowGeneration.State.RESET
        live.ended_at = now
        live.save(update_fields=["state", "ended_at"])
    snapshot = normalize_workflow_graph(
        locked.graph if isinstance(locked.graph, dict) else EMPTY_GRAPH, workflow_id=locked.pk
    ).graph
    generation = WorkflowGeneration.objects.create(
        workflow=locked,
        number=new_number,
        state=WorkflowGeneration.State.LIVE,
        graph=snapshot,
        admitted_by=WorkflowGeneration.AdmittedBy.RESET,
        graph_revision=locked.revision,
        reset_from=previous,
    )
    locked.live_generation = new_number
    locked.save(update_fields=["live_generation", "updated_at"])
    for listener in generation_start_listeners().values():
        listener(workflow=locked, generation=generation)
    publish_workflow_event(
        workflow_id=locked.pk,
        event=workflow_reset_event(workflow_id=locked.pk, generation=new_number, previous=previous),
    )
    return ResetOutcome(locked, generation, previous, report)


def _reset_nodes(workflow: Workflow, live: WorkflowGeneration | None) -> list[dict]:
    # The nodes of the draft and of the running snapshot: a node removed since Start still had state.
    nodes: dict[str, dict] = {}
    for graph in (live.graph if live else None, workflow.graph):
        if not isinstance(graph, dict):
            continue
        normalized = normalize_workflow_graph(graph, workflow_id=workflow.pk).graph
        for node in normalized["nodes"]:
            nodes.setdefault(node["id"], node)
    return list(nodes.values())
