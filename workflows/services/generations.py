"""Start and Stop: admit a generation with a snapshot of the graph, end the live one. The generation-end
listeners (workflows/listeners.py) hear of every end."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from core.errors import ServiceError
from core.realtime import publish_workflow_event

from ..events import workflow_generation_event
from ..graph import run_issues
from ..listeners import generation_end_listeners, generation_start_listeners
from ..locks import workflow_for_update
from ..models import Workflow, WorkflowGeneration
from .prepare import prepare_graph


def next_generation_number(workflow: Workflow) -> int:
    top = WorkflowGeneration.objects.filter(workflow=workflow).aggregate(top=Max("number"))["top"] or 0
    return max(top, workflow.live_generation) + 1


def _publish_generation(workflow: Workflow, generation: WorkflowGeneration) -> None:
    publish_workflow_event(
        workflow_id=workflow.pk,
        event=workflow_generation_event(workflow_id=workflow.pk, generation=generation.number, state=generation.state),
    )


def live_generation_of(workflow: Workflow) -> WorkflowGeneration | None:
    return WorkflowGeneration.objects.filter(workflow=workflow, state=WorkflowGeneration.State.LIVE).first()


@transaction.atomic
def workflow_start(*, workflow: Workflow) -> tuple[WorkflowGeneration, bool]:
    """Deploy: admit generation n+1 with a snapshot of the normalized graph; a graph whose chat trigger feeds no
    agent is refused. Starting again with an unchanged graph returns the running generation (a double click does
    not wipe the conversations)."""
    locked = workflow_for_update(workflow.pk)
    result, _warnings = prepare_graph(graph=locked.graph, workflow_id=locked.pk)
    cannot_run = run_issues(result.graph)
    if cannot_run:
        # A generation that cannot answer would only move the refusal to the chat's first message.
        raise ServiceError(
            cannot_run[0].code.lower(), cannot_run[0].message, extra={"issues": [i.as_dict() for i in cannot_run]}
        )
    live = live_generation_of(locked)
    if live is not None and live.graph_revision == locked.revision:
        return live, False
    now = timezone.now()
    if live is not None:
        live.state = WorkflowGeneration.State.SUPERSEDED
        live.ended_at = now
        live.save(update_fields=["state", "ended_at"])
        _generation_ended(locked, live)
    generation = WorkflowGeneration.objects.create(
        workflow=locked,
        number=next_generation_number(locked),
        state=WorkflowGeneration.State.LIVE,
        graph=result.graph,
        admitted_by=WorkflowGeneration.AdmittedBy.START,
        graph_revision=locked.revision,
    )
    locked.live_generation = generation.number
    locked.save(update_fields=["live_generation", "updated_at"])
    for listener in generation_start_listeners().values():
        listener(workflow=locked, generation=generation)
    _publish_generation(locked, generation)
    return generation, True


@transaction.atomic
def workflow_stop(*, workflow: Workflow) -> WorkflowGeneration | None:
    """End the live generation. Idempotent: stopping a stopped workflow returns its latest generation."""
    locked = workflow_for_update(workflow.pk)
    live = live_generation_of(locked)
    if live is None:
        return WorkflowGeneration.objects.filter(workflow=locked).order_by("-number").first()
    live.state = WorkflowGeneration.State.STOPPED
    live.ended_at = timezone.now()
    live.save(update_fields=["state", "ended_at"])
    _generation_ended(locked, live)
    _publish_generation(locked, live)
    return live


def _generation_ended(workflow: Workflow, generation: WorkflowGeneration) -> None:
    for listener in generation_end_listeners().values():
        listener(workflow=workflow, generation=generation)
