"""The owner's workflow pages: the list (home) and its actions, the editor shell, the run history; 404 across owners."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from agents.models import Firing
from workflows.models import ArchiveOutbox, Workflow, WorkflowGeneration
from workflows.services import workflow_start

from .factories import basic_graph

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_pages(owner):
    client = Client()
    client.force_login(owner)
    return client


@pytest.fixture
def intruder_pages(other_owner):
    client = Client()
    client.force_login(other_owner)
    return client


def test_home_lists_workflows_with_their_state_and_offers_the_templates(owner_pages, create_workflow):
    running = create_workflow(basic_graph(), name="Running one")
    workflow_start(workflow=running)
    create_workflow(basic_graph(), name="Draft one")
    page = owner_pages.get("/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "through the API" not in text
    assert "Running · generation 1" in text and "Never started" in text
    assert 'value="blank"' in text and 'value="demo"' in text and "Demo assistant" in text
    assert f"/workflows/{running.pk}/" in text and f"/workflows/{running.pk}/runs/" in text


def test_home_with_no_workflows_points_to_new_not_to_the_api(owner_pages):
    text = owner_pages.get("/").content.decode()
    assert "You have no workflows yet" in text and "Create and open the editor" in text


def test_new_from_the_demo_template_and_blank(owner_pages, owner):
    response = owner_pages.post("/workflows/new/", {"template": "demo", "name": ""})
    demo = Workflow.objects.get(owner=owner)
    assert response.status_code == 302 and response["Location"] == f"/workflows/{demo.pk}/"
    assert demo.name == "Demo assistant"
    assert sorted(n["type"] for n in demo.graph["nodes"]) == ["agent", "chatTrigger", "context", "simpleMemory"]
    owner_pages.post("/workflows/new/", {"template": "blank", "name": "Mine"})
    blank = Workflow.objects.get(owner=owner, name="Mine")
    assert blank.graph == {"nodes": [], "edges": []}
    response = owner_pages.post("/workflows/new/", {"template": "nope"}, follow=True)
    assert "There is no such template." in response.content.decode()


def test_rename_duplicate_and_delete_with_the_archive_job(owner_pages, create_workflow, owner):
    workflow = create_workflow(basic_graph(), name="Before")
    workflow_start(workflow=workflow)
    owner_pages.post(f"/workflows/{workflow.pk}/rename/", {"name": "After"})
    workflow.refresh_from_db()
    assert workflow.name == "After" and workflow.revision == 1  # a rename is not a graph edit
    owner_pages.post(f"/workflows/{workflow.pk}/duplicate/")
    copy = Workflow.objects.get(owner=owner, name="After (copy)")
    assert copy.live_generation == 0 and not WorkflowGeneration.objects.filter(workflow=copy).exists()
    assert len(copy.graph["nodes"]) == 4
    confirm = owner_pages.get(f"/workflows/{workflow.pk}/delete/")
    assert confirm.status_code == 200 and "cannot be undone" in confirm.content.decode()
    assert Workflow.objects.filter(pk=workflow.pk).exists()  # GET only asks
    owner_pages.post(f"/workflows/{workflow.pk}/delete/")
    assert not Workflow.objects.filter(pk=workflow.pk).exists()
    job = ArchiveOutbox.objects.get(workflow_id=workflow.pk)
    assert job.reason == ArchiveOutbox.Reason.WORKFLOW_DELETED
    assert job.payload["context_node_ids"] == [f"{workflow.pk}:context:1"]


def test_import_a_json_export(owner_pages, owner, create_workflow):
    source = create_workflow(basic_graph(), name="Exported")
    document = owner_pages.get(f"/api/workflows/{source.pk}/export/").json()
    upload = SimpleUploadedFile("export.json", json.dumps(document).encode(), content_type="application/json")
    response = owner_pages.post("/workflows/import/", {"document": upload, "name": "Imported copy"})
    imported = Workflow.objects.get(owner=owner, name="Imported copy")
    assert response["Location"] == f"/workflows/{imported.pk}/"
    assert all(n["id"].startswith(f"{imported.pk}:") for n in imported.graph["nodes"])
    bad = SimpleUploadedFile("x.json", b"not json", content_type="application/json")
    text = owner_pages.post("/workflows/import/", {"document": bad}, follow=True).content.decode()
    assert "That file is not JSON" in text
    invalid = {"graph": {"nodes": [{"id": "a", "type": "agent", "params": {}}], "edges": []}}
    upload = SimpleUploadedFile("bad.json", json.dumps(invalid).encode(), content_type="application/json")
    text = owner_pages.post("/workflows/import/", {"document": upload}, follow=True).content.decode()
    assert "Import refused" in text and "INVALID_PARAMS" in text


def test_the_editor_page_is_a_shell_configured_for_the_api(owner_pages, create_workflow):
    workflow = create_workflow(basic_graph(), name="Edit me")
    text = owner_pages.get(f"/workflows/{workflow.pk}/").content.decode()
    assert "Edit me" in text and "vendor/drawflow/drawflow.min.js" in text and "js/workflow_editor.js" in text
    assert '"nodeTypesUrl": "/api/node-types/"' in text and f'"api": "/api/workflows/{workflow.pk}/"' in text
    # The page has no palette of its own: the types come from /api/node-types/ at run time.
    assert "simpleMemory" not in text and "chatTrigger" not in text
    assert "<script>" not in text and " style=" not in text and " onclick=" not in text


def test_run_history_page_shows_a_failed_firings_code(owner_pages, create_workflow):
    workflow = create_workflow(basic_graph())
    firing = Firing.objects.create(
        workflow=workflow,
        generation=1,
        agent_node_id=f"{workflow.pk}:agent:1",
        prompt="hello",
        state=Firing.State.FAILED,
        end_reason="failed",
        error_code="provider_authentication",
        error_message="Invalid key.",
        agent_config={"name": "Lead", "provider": "openai", "model": "gpt-4.1"},
    )
    text = owner_pages.get(f"/workflows/{workflow.pk}/runs/").content.decode()
    assert "provider_authentication" in text and "Lead" in text
    detail = owner_pages.get(f"/workflows/{workflow.pk}/runs/{firing.pk}/").content.decode()
    assert "provider_authentication" in detail and "Invalid key." in detail
    assert owner_pages.get(f"/workflows/{workflow.pk}/runs/nope/").status_code == 404


def test_another_owner_gets_404_on_every_page(intruder_pages, create_workflow):
    workflow = create_workflow(basic_graph(), name="Not yours")
    firing = Firing.objects.create(workflow=workflow, generation=1, agent_node_id="x", prompt="p")
    for path in ["", "runs/", f"runs/{firing.pk}/", "delete/"]:
        assert intruder_pages.get(f"/workflows/{workflow.pk}/{path}").status_code == 404, path
    for path in ["rename/", "duplicate/", "delete/"]:
        assert intruder_pages.post(f"/workflows/{workflow.pk}/{path}", {"name": "x"}).status_code == 404, path
    workflow.refresh_from_db()
    assert workflow.name == "Not yours" and Workflow.objects.count() == 1
    assert "Not yours" not in intruder_pages.get("/").content.decode()


def test_pages_need_a_login(create_workflow):
    workflow = create_workflow(basic_graph())
    for path in ["/", f"/workflows/{workflow.pk}/", f"/workflows/{workflow.pk}/runs/"]:
        response = Client().get(path)
        assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_list_reads_in_a_fixed_number_of_queries(owner, create_workflow, django_assert_max_num_queries):
    from workflows.selectors import workflows_overview

    for n in range(5):
        create_workflow(basic_graph(), name=f"W{n}")
    with django_assert_max_num_queries(2):
        rows = workflows_overview(user=owner)
    assert len(rows) == 5 and all(row["state"] == "draft" for row in rows)


def test_an_import_larger_than_any_export_is_refused_unread(owner_pages, owner, settings):
    settings.WORKFLOW_MAX_GRAPH_BYTES = 1024
    upload = SimpleUploadedFile("big.json", b"{" + b" " * (200 * 1024) + b"}", content_type="application/json")
    text = owner_pages.post("/workflows/import/", {"document": upload}, follow=True).content.decode()
    assert "more than a workflow export can be" in text
    assert not Workflow.objects.filter(owner=owner).exists()
