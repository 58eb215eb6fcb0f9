"""What workflow actions send on commit, checked where they are made (capture_events, workflows/events.py)."""

from __future__ import annotations

import pytest

from core.errors import ConflictError
from tests.workflows.factories import basic_graph
from workflows import services
from workflows.events import workflow_generation_event, workflow_reset_event, workflow_updated_event

pytestmark = pytest.mark.django_db(transaction=True)


def test_save_start_stop_and_reset_each_send_their_one_event(owner, capture_events):
    workflow = services.workflow_create(owner=owner, name="w", graph=basic_graph()).workflow
    assert capture_events.sent == []  # creating a workflow announces nothing: no socket can be open on it yet

    saved = services.workflow_save(workflow=workflow, graph=workflow.graph, revision=workflow.revision).workflow
    assert capture_events.events() == [workflow_updated_event(workflow_id=workflow.pk, revision=saved.revision)]

    capture_events.clear()
    generation, _ = services.workflow_start(workflow=workflow)
    assert capture_events.events() == [
        workflow_generation_event(workflow_id=workflow.pk, generation=generation.number, state="live")
    ]

    capture_events.clear()
    outcome = services.workflow_reset(workflow=workflow, actor=owner)
    assert capture_events.events("workflow.reset") == [
        workflow_reset_event(workflow_id=workflow.pk, generation=outcome.generation.number, previous=generation.number)
    ]


def test_a_refused_save_sends_nothing(owner, capture_events):
    workflow = services.workflow_create(owner=owner, name="w", graph=basic_graph()).workflow
    with pytest.raises(ConflictError):
        services.workflow_save(workflow=workflow, graph=workflow.graph, revision=workflow.revision + 5)
    assert capture_events.sent == []
