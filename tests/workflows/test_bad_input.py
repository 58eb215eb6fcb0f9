"""Issue 20, "bad input changes nothing": a wrongly typed graph document is refused whole with field errors on every
write path (create, update, import, validate), nothing is saved, and the stored graph is exactly as it was."""

import pytest

from workflows.models import Workflow
from workflows.services import workflow_save

from .factories import agent, basic_graph, edge, node
from .test_api import create

pytestmark = pytest.mark.django_db

BAD_GRAPHS = [
    ({"nodes": "x", "edges": []}, "nodes"),
    ({"nodes": [], "edges": "x"}, "edges"),
    ({"nodes": []}, "edges"),
    ({"edges": []}, "nodes"),
    ({"nodes": [1], "edges": []}, "nodes[0]"),
    ({"nodes": [{"id": "a"}], "edges": []}, "nodes[0].type"),
    ({"nodes": [{"id": ["a"], "type": "agent"}], "edges": []}, "nodes[0].id"),
    ({"nodes": [{"id": "a", "type": "agent", "params": "x"}], "edges": []}, "nodes[0].params"),
    ({"nodes": [{"id": "a", "type": "agent", "position": {"x": "1", "y": 2}}], "edges": []}, "nodes[0].position"),
    ({"nodes": [], "edges": [None]}, "edges[0]"),
    ({"nodes": [], "edges": [{"source": "a"}]}, "edges[0].target"),
    ({"nodes": [], "edges": [{"source": "a", "target": "b", "sourceHandle": 3}]}, "edges[0].sourceHandle"),
]


@pytest.mark.parametrize(("graph", "path"), BAD_GRAPHS)
def test_an_update_with_a_wrongly_typed_graph_answers_400_and_keeps_the_saved_graph(owner_client, graph, path):
    body = create(owner_client)
    wid, saved = body["id"], Workflow.objects.get(pk=body["id"])
    response = owner_client.put(f"/api/workflows/{wid}/", {"graph": graph, "revision": 1}, format="json")
    assert response.status_code == 400, response.content
    data = response.json()
    assert data["code"] == "invalid_request" and path in data["errors"]["graph"], data
    after = Workflow.objects.get(pk=wid)
    assert after.graph == saved.graph and after.revision == saved.revision == 1 and len(after.graph["nodes"]) == 4


@pytest.mark.parametrize(("graph", "path"), BAD_GRAPHS[:6])
def test_create_import_and_validate_refuse_the_same_documents(owner_client, graph, path):
    before = Workflow.objects.count()
    created = owner_client.post("/api/workflows/", {"name": "x", "graph": graph}, format="json")
    imported = owner_client.post("/api/workflows/import/", {"name": "x", "graph": graph}, format="json")
    for response in (created, imported):
        assert response.status_code == 400 and path in response.json()["errors"]["graph"], response.content
    assert Workflow.objects.count() == before
    wid = create(owner_client)["id"]
    validated = owner_client.post(f"/api/workflows/{wid}/validate/", {"graph": graph}, format="json")
    assert validated.status_code == 400 and path in validated.json()["errors"]["graph"]


def test_wrong_types_beside_the_graph_are_field_errors_too(owner_client):
    wid = create(owner_client)["id"]
    for body, field in (
        ({"name": 5, "graph": basic_graph()}, "name"),
        ({"name": "x", "graph": basic_graph(), "revision": "1"}, "revision"),
    ):
        response = owner_client.put(f"/api/workflows/{wid}/", body, format="json")
        assert response.status_code == 400 and field in response.json()["errors"], (field, response.content)
    imported = owner_client.post("/api/workflows/import/", {"graph": basic_graph(), "format": 0}, format="json")
    assert imported.status_code == 400 and "format" in imported.json()["errors"]
    assert Workflow.objects.get(pk=wid).revision == 1


def test_a_nul_character_is_refused_before_the_database(owner_client):
    wid = create(owner_client)["id"]
    graph = basic_graph()
    graph["nodes"][1]["params"]["system_prompt"] = "hi\x00there"
    response = owner_client.put(f"/api/workflows/{wid}/", {"graph": graph, "revision": 1}, format="json")
    # The request-wide check (invalid_text) or the graph's own (invalid_graph, for callers of the service).
    assert response.status_code == 400 and response.json()["code"] in ("invalid_text", "invalid_graph")
    assert Workflow.objects.get(pk=wid).revision == 1
    with pytest.raises(Exception) as raised:
        workflow_save(workflow=Workflow.objects.get(pk=wid), graph=graph, revision=1)
    assert getattr(raised.value, "code", None) == "invalid_graph"


def test_the_allowed_normalizations_still_answer_with_warnings(owner_client):
    # Aliases, the legacy memory rewrite and dropped unknown fields are what docs/workflows.md#normalize allows;
    # those still save.
    graph = {
        "nodes": [{**agent("a"), "selected": True}, node("m", "simpleMemory")],
        "edges": [edge("m", "output-memory", "a", "input-memory")],
    }
    response = owner_client.post("/api/workflows/", {"name": "legacy", "graph": graph}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    codes = {w["code"] for w in body["warnings"]}
    assert {"LEGACY_MEMORY_EDGE", "DROPPED_FIELDS"} <= codes and body["aliases"]["a"] == f"{body['id']}:agent:1"


def test_the_service_refuses_a_malformed_graph_for_any_caller(create_workflow):
    workflow = create_workflow(basic_graph())
    with pytest.raises(Exception) as raised:
        workflow_save(workflow=workflow, graph={"nodes": "x", "edges": []}, revision=1)
    assert getattr(raised.value, "code", None) == "invalid_request"
    workflow.refresh_from_db()
    assert len(workflow.graph["nodes"]) == 4 and workflow.revision == 1


def test_the_published_schema_names_the_graph_shape(owner_client):
    schema = owner_client.get("/api/schema/?format=json").json()
    graph = schema["components"]["schemas"]["WorkflowDetailInputRequest"]["properties"]["graph"]
    assert graph["required"] == ["nodes", "edges"] and graph["properties"]["nodes"]["type"] == "array"
    assert graph["properties"]["nodes"]["items"]["required"] == ["type"]
