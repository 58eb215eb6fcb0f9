"""Two saves from the same revision: whatever the interleaving, one wins and the other is a 409."""

import threading

import pytest
from django.db import connection

from core.errors import ConflictError
from workflows import services
from workflows.models import Workflow

from .factories import agent, basic_graph


@pytest.mark.django_db(transaction=True)
def test_concurrent_saves_from_one_revision_never_both_win(owner):
    workflow = services.workflow_create(owner=owner, name="race", graph=basic_graph()).workflow
    barrier = threading.Barrier(2)
    results = []

    def save(label: str):
        try:
            graph = Workflow.objects.get(pk=workflow.pk).graph
            graph["nodes"].append(agent(label, label))
            barrier.wait(timeout=10)
            services.workflow_save(workflow=workflow, graph=graph, revision=1)
            results.append(("saved", label))
        except ConflictError as exc:
            results.append(("conflict", exc.extra["current_revision"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=(name,)) for name in ("One", "Two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(kind for kind, _ in results) == ["conflict", "saved"]
    assert ("conflict", 2) in results
    stored = Workflow.objects.get(pk=workflow.pk)
    assert stored.revision == 2 and len(stored.graph["nodes"]) == 5
