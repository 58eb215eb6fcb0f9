"""Workflow services: save, Context lifecycle, the archive outbox, generations, add_subagent, legacy imports."""

import pytest

from core.errors import ConflictError, NotFoundError, ServiceError
from workflows import services
from workflows.graph import agent_wiring
from workflows.models import ArchiveOutbox, LegacyImportRecord, Workflow, WorkflowGeneration
from workflows.outbox import archive_outbox_drain, archive_outbox_process
from workflows.selectors import generation_graph

from .factories import agent, basic_graph, context_edge, edge, edge_set, ids_of, node, tool_edge, trigger_edge

pytestmark = pytest.mark.django_db


def _without(graph: dict, node_type: str) -> dict:
    gone = {n["id"] for n in graph["nodes"] if n["type"] == node_type}
    return {
        "nodes": [n for n in graph["nodes"] if n["id"] not in gone],
        "edges": [e for e in graph["edges"] if e["source"] not in gone and e["target"] not in gone],
    }


def test_create_canonicalizes_with_the_new_workflow_id(owner):
    outcome = services.workflow_create(owner=owner, name="W", graph=basic_graph())
    workflow = outcome.workflow
    assert outcome.aliases["lead"] == f"{workflow.pk}:agent:1"
    assert ids_of(workflow.graph, "context") == [f"{workflow.pk}:context:1"]
    assert workflow.revision == 1 and workflow.graph_version == 2


def test_create_with_errors_creates_nothing(owner):
    bad = {
        "nodes": [agent("a"), node("c", "context"), node("d", "context")],
        "edges": [context_edge("c", "a"), context_edge("d", "a")],
    }
    with pytest.raises(ServiceError) as caught:
        services.workflow_create(owner=owner, name="W", graph=bad)
    assert caught.value.code == "invalid_context_topology"
    assert [i["code"] for i in caught.value.extra["issues"]] == ["MULTIPLE_CONTEXTS"]
    assert not Workflow.objects.exists()


def test_save_is_optimistic_on_revision(create_workflow):
    workflow = create_workflow(basic_graph())
    services.workflow_save(workflow=workflow, graph=workflow.graph, revision=1)
    with pytest.raises(ConflictError) as caught:
        services.workflow_save(workflow=workflow, graph=workflow.graph, revision=1)
    assert caught.value.code == "revision_conflict"
    assert caught.value.extra == {"current_revision": 2}


def test_invalid_params_are_refused_with_the_node_and_field(create_workflow):
    workflow = create_workflow(basic_graph())
    graph = workflow.graph
    graph["nodes"][1]["params"]["provider"] = "skynet"
    with pytest.raises(ServiceError) as caught:
        services.workflow_save(workflow=workflow, graph=graph, revision=1)
    assert caught.value.code == "invalid_graph"
    issue = caught.value.extra["issues"][0]
    assert (issue["code"], issue["node_id"], issue["field"]) == ("INVALID_PARAMS", f"{workflow.pk}:agent:1", "provider")


def test_oversized_graph_is_refused_before_normalization(create_workflow, settings):
    workflow = create_workflow(basic_graph())
    settings.WORKFLOW_MAX_GRAPH_BYTES = 1024
    graph = workflow.graph
    graph["nodes"][1]["params"]["system_prompt"] = "x" * 2000
    with pytest.raises(ServiceError) as caught:
        services.workflow_save(workflow=workflow, graph=graph, revision=1)
    assert caught.value.code == "graph_too_large"


def test_a_user_deleted_context_is_not_restored_and_its_removal_is_archived_on_commit(
    create_workflow, archive_calls, eager_celery, django_capture_on_commit_callbacks
):
    workflow = create_workflow(basic_graph())
    context_id, agent_id = f"{workflow.pk}:context:1", f"{workflow.pk}:agent:1"
    # When the owner saves the graph without its Context
    with django_capture_on_commit_callbacks(execute=True):
        outcome = services.workflow_save(workflow=workflow, graph=_without(workflow.graph, "context"), revision=1)
    # Then the saved graph has no Context (save never restores one) and the archive ran once it committed
    assert ids_of(outcome.workflow.graph, "context") == []
    assert outcome.extra["archived_context_node_ids"] == [context_id]
    row = ArchiveOutbox.objects.get()
    assert (row.workflow_id, row.reason, row.state) == (workflow.pk, "context_removed", "done")
    assert row.payload == {"context_node_ids": [context_id], "agent_node_ids": [agent_id]}
    assert len(archive_calls) == 1
    assert archive_calls[0]["workflow"].pk == workflow.pk
    assert archive_calls[0]["agent_node_ids"] == [agent_id]
    # Saving again (still no Context) neither restores it nor archives again
    with django_capture_on_commit_callbacks(execute=True):
        again = services.workflow_save(workflow=workflow, graph=outcome.workflow.graph, revision=2)
    assert ids_of(again.workflow.graph, "context") == []
    assert ArchiveOutbox.objects.count() == 1
    # And draining a done row is a no-op (idempotent)
    assert archive_outbox_process(row_id=row.pk) is False
    assert archive_outbox_drain() == 0
    assert len(archive_calls) == 1


def test_outbox_row_is_written_in_the_save_transaction_and_drained_later(create_workflow, archive_calls):
    workflow = create_workflow(basic_graph())
    # No on-commit execution here: the row exists, pending, until a drain claims it
    services.workflow_save(workflow=workflow, graph=_without(workflow.graph, "context"), revision=1)
    row = ArchiveOutbox.objects.get()
    assert row.state == "pending" and archive_calls == []
    assert archive_outbox_drain() == 1
    row.refresh_from_db()
    assert row.state == "done" and row.attempts == 1 and len(archive_calls) == 1
    assert archive_outbox_drain() == 0


def test_a_failing_archive_listener_leaves_the_row_for_a_retry(create_workflow, settings):
    from workflows.listeners import register_archive_listener, unregister_archive_listener

    attempts = []

    def flaky(**kwargs):
        attempts.append(kwargs)
        if len(attempts) == 1:
            raise RuntimeError("store down")
        return 3

    register_archive_listener(flaky, name="tests.flaky")
    try:
        workflow = create_workflow(basic_graph())
        services.workflow_save(workflow=workflow, graph=_without(workflow.graph, "context"), revision=1)
        row = ArchiveOutbox.objects.get()
        assert archive_outbox_drain() == 0
        row.refresh_from_db()
        assert row.state == "pending" and "store down" in row.last_error
        assert archive_outbox_drain() == 1
        row.refresh_from_db()
        assert row.state == "done" and row.result["tests.flaky"] == 3
    finally:
        unregister_archive_listener("tests.flaky")


def test_deleting_an_agent_leaves_its_context(create_workflow):
    workflow = create_workflow(basic_graph())
    outcome = services.workflow_save(workflow=workflow, graph=_without(workflow.graph, "agent"), revision=1)
    assert ids_of(outcome.workflow.graph, "context") == [f"{workflow.pk}:context:1"]
    assert not ArchiveOutbox.objects.exists()


def test_deleting_a_workflow_archives_with_its_id(
    create_workflow, archive_calls, eager_celery, django_capture_on_commit_callbacks
):
    workflow = create_workflow(basic_graph())
    workflow_id = workflow.pk
    with django_capture_on_commit_callbacks(execute=True):
        services.workflow_delete(workflow=workflow)
    assert not Workflow.objects.filter(pk=workflow_id).exists()
    row = ArchiveOutbox.objects.get()
    assert (row.workflow_id, row.reason, row.state) == (workflow_id, "workflow_deleted", "done")
    assert archive_calls[0]["workflow"] is None and archive_calls[0]["workflow_id"] == workflow_id


def test_add_subagent_wires_a_fresh_context_to_the_teammate_only(create_workflow):
    workflow = create_workflow(basic_graph())
    lead = f"{workflow.pk}:agent:1"
    outcome = services.workflow_add_subagent(
        workflow=workflow, lead_node_id=lead, spec={"name": "Researcher", "provider": "offline", "model": "m"}
    )
    teammate, context = outcome.extra["subagent_node_id"], outcome.extra["context_node_id"]
    assert teammate == f"{workflow.pk}:agent:2" and context == f"{workflow.pk}:context:2"
    graph = outcome.workflow.graph
    edges = edge_set(graph)
    assert (teammate, "output-tool", lead, "input-tools") in edges
    assert (context, "output-context", teammate, "input-context") in edges
    # The lead keeps its own Context, and the new Context feeds nothing else
    assert agent_wiring(graph, lead).context_node_id == f"{workflow.pk}:context:1"
    assert [e for e in graph["edges"] if e["source"] == context] == [
        e for e in graph["edges"] if e["source"] == context and e["target"] == teammate
    ]
    wiring = agent_wiring(graph, lead)
    assert [t.tool_name for t in wiring.teammates] == ["researcher"]
    assert [t.tool_name for t in wiring.tool_nodes] == ["memory"]
    assert outcome.workflow.revision == 2
    assert "__new_subagent__" not in outcome.aliases


def test_add_subagent_refuses_a_lead_that_is_not_an_agent(create_workflow):
    workflow = create_workflow(basic_graph())
    with pytest.raises(ServiceError) as caught:
        services.workflow_add_subagent(workflow=workflow, lead_node_id=f"{workflow.pk}:context:1", spec={"model": "m"})
    assert caught.value.code == "unknown_node"


def test_creating_an_agent_adds_no_context(create_workflow):
    workflow = create_workflow(basic_graph())
    graph = workflow.graph
    graph["nodes"].append(agent("copy", "Copy"))
    outcome = services.workflow_save(workflow=workflow, graph=graph, revision=1)
    assert len(ids_of(outcome.workflow.graph, "context")) == 1
    assert agent_wiring(outcome.workflow.graph, f"{workflow.pk}:agent:2").context_node_id is None


def test_start_admits_generations_and_stop_ends_the_live_one(create_workflow):
    workflow = create_workflow(basic_graph())
    first, created = services.workflow_start(workflow=workflow)
    assert (first.number, first.state, created) == (1, "live", True)
    # Starting again with an unchanged graph keeps the running generation
    same, created = services.workflow_start(workflow=workflow)
    assert (same.pk, created) == (first.pk, False)
    # After a save, Start deploys generation 2 and supersedes 1
    workflow.refresh_from_db()
    graph = workflow.graph
    graph["nodes"][1]["params"]["system_prompt"] = "Be brief."
    services.workflow_save(workflow=workflow, graph=graph, revision=workflow.revision)
    second, created = services.workflow_start(workflow=workflow)
    assert (second.number, created) == (2, True)
    first.refresh_from_db()
    assert first.state == "superseded" and first.ended_at is not None
    workflow.refresh_from_db()
    assert workflow.live_generation == 2
    assert generation_graph(workflow, 2)["nodes"][1]["params"]["system_prompt"] == "Be brief."
    assert generation_graph(workflow, 1)["nodes"][1]["params"]["system_prompt"] == ""
    assert generation_graph(workflow, 0) == workflow.graph
    with pytest.raises(NotFoundError):
        generation_graph(workflow, 9)
    stopped = services.workflow_stop(workflow=workflow)
    assert (stopped.number, stopped.state) == (2, "stopped")
    assert services.workflow_stop(workflow=workflow).pk == stopped.pk
    assert not WorkflowGeneration.objects.filter(workflow=workflow, state="live").exists()


def test_start_refuses_an_invalid_stored_graph(owner):
    workflow = Workflow.objects.create(owner=owner, name="raw", graph={"nodes": [node("x", "mystery")], "edges": []})
    with pytest.raises(ServiceError) as caught:
        services.workflow_start(workflow=workflow)
    assert caught.value.code == "invalid_graph"


LEGACY = {
    "nodes": [
        node("t", "chatTrigger"),
        agent("a", "A"),
        {"id": "m", "type": "simpleMemory", "params": {"transcript": "## User\nhello\n## Assistant\nhi\n"}},
    ],
    "edges": [trigger_edge("t", "a"), edge("m", "output-memory", "a", "input-memory")],
}


def test_saving_a_legacy_graph_keeps_the_transcript_as_one_immutable_record(create_workflow):
    workflow = create_workflow({"nodes": [], "edges": []})
    outcome = services.workflow_save(workflow=workflow, graph=LEGACY, revision=1)
    record = LegacyImportRecord.objects.get()
    assert (record.kind, record.agent_node_id, record.context_node_id) == (
        "legacy_partial",
        f"{workflow.pk}:agent:1",
        f"{workflow.pk}:context:1",
    )
    assert record.transcript.startswith("## User")
    assert outcome.legacy_imports[0]["transcript_chars"] == len(record.transcript)
    # Saving the normalized graph again imports nothing more: the legacy topology is retired
    services.workflow_save(workflow=workflow, graph=outcome.workflow.graph, revision=2)
    assert LegacyImportRecord.objects.count() == 1
    # The transcript never became Memory params
    assert outcome.workflow.graph["nodes"][2]["params"] == {"reset_policy": "keep"}


def test_loading_a_stored_legacy_row_upgrades_it_once(owner):
    workflow = Workflow.objects.create(owner=owner, name="old", graph=LEGACY)
    outcome = services.workflow_load(workflow=workflow)
    workflow.refresh_from_db()
    assert workflow.revision == 2
    assert ids_of(workflow.graph, "context") == [f"{workflow.pk}:context:1"]
    assert LegacyImportRecord.objects.filter(workflow=workflow).count() == 1
    assert "LEGACY_MEMORY_EDGE" in [w["code"] for w in outcome.warnings]
    # A second load reads, it does not write
    services.workflow_load(workflow=workflow)
    workflow.refresh_from_db()
    assert workflow.revision == 2


def test_demo_workflow_goes_through_the_create_service(owner):
    from workflows.services import workflow_demo_ensure

    workflow, created = workflow_demo_ensure(owner=owner)
    again, created_again = workflow_demo_ensure(owner=owner)
    assert created and not created_again and again.pk == workflow.pk
    wiring = agent_wiring(workflow.graph, f"{workflow.pk}:agent:1")
    assert wiring.trigger and wiring.context_node_id == f"{workflow.pk}:context:1"
    assert [t.tool_name for t in wiring.tool_nodes] == ["memory"]
    assert workflow.graph["nodes"][1]["params"]["provider"] == "offline"


def test_todos_node_is_wired_as_a_tool(create_workflow):
    workflow = create_workflow(basic_graph(with_todos=True))
    wiring = agent_wiring(workflow.graph, f"{workflow.pk}:agent:1")
    assert sorted(t.tool_name for t in wiring.tool_nodes) == ["memory", "todos"]


def test_tool_edge_helper_graph(create_workflow):
    graph = {"nodes": [agent("a", "A"), node("todo", "todos")], "edges": [tool_edge("todo", "a")]}
    workflow = create_workflow(graph)
    assert agent_wiring(workflow.graph, f"{workflow.pk}:agent:1").trigger is False


def test_outbox_claims_are_conditional_and_a_dead_workers_claim_expires(create_workflow, archive_calls, settings):
    from datetime import timedelta

    from django.utils import timezone

    from workflows.tasks import drain_archive_outbox

    assert drain_archive_outbox.name == "workflows.drain_archive_outbox"
    assert drain_archive_outbox.queue == "housekeeping"
    workflow = create_workflow(basic_graph())
    services.workflow_save(workflow=workflow, graph=_without(workflow.graph, "context"), revision=1)
    row = ArchiveOutbox.objects.get()
    # Given another worker holds a fresh claim, this one does not process the row
    ArchiveOutbox.objects.filter(pk=row.pk).update(state="processing", claimed_at=timezone.now(), attempts=1)
    assert archive_outbox_process(row_id=row.pk) is False
    assert archive_calls == []
    # When that claim is older than the timeout (the worker died), the row is claimed again
    stale = timezone.now() - timedelta(seconds=settings.WORKFLOW_ARCHIVE_CLAIM_TIMEOUT_S + 1)
    ArchiveOutbox.objects.filter(pk=row.pk).update(claimed_at=stale)
    assert drain_archive_outbox(row_ids=[row.pk]) == 1
    row.refresh_from_db()
    assert row.state == "done" and row.attempts == 2 and len(archive_calls) == 1


def test_a_new_node_never_takes_the_id_of_a_deleted_one(create_workflow, archive_calls):
    # Given the Memory node and the Context were deleted
    workflow = create_workflow(basic_graph())
    pk = workflow.pk
    graph = _without(_without(workflow.graph, "simpleMemory"), "context")
    services.workflow_save(workflow=workflow, graph=graph, revision=1)
    workflow.refresh_from_db()
    # When the owner adds a new Memory and a new Context to a different agent in a later save
    graph = workflow.graph
    graph["nodes"] += [node("m", "simpleMemory"), node("c", "context"), agent("b", "B")]
    graph["edges"] += [tool_edge("m", f"{pk}:agent:1"), context_edge("c", "b")]
    outcome = services.workflow_save(workflow=workflow, graph=graph, revision=2)
    # Then they get fresh numbers: the new Memory cannot see the deleted node's namespace
    assert outcome.aliases == {"m": f"{pk}:simpleMemory:2", "c": f"{pk}:context:2", "b": f"{pk}:agent:2"}
    assert outcome.workflow.node_numbers["simpleMemory"] == 2


def test_persisting_the_same_legacy_import_twice_keeps_one_record(create_workflow):
    from workflows.graph import normalize_workflow_graph
    from workflows.services.prepare import persist_legacy_imports

    workflow = create_workflow({"nodes": [], "edges": []})
    result = normalize_workflow_graph(LEGACY, workflow_id=workflow.pk)
    persist_legacy_imports(workflow, result)
    persist_legacy_imports(workflow, result)  # a retried job
    assert LegacyImportRecord.objects.filter(workflow=workflow).count() == 1
