"""The workflows REST API: every endpoint, ownership (404 across owners), 409, 400 codes, export canaries."""

import json

import pytest
from rest_framework.test import APIClient

from workflows.models import ArchiveOutbox, Workflow

from .factories import agent, basic_graph, context_edge, edge, node

pytestmark = pytest.mark.django_db

CANARY_CONVERSATION = "CANARY-conversation-7f3a"
CANARY_MEMORY = "CANARY-memory-91bc"
CANARY_TODO = "CANARY-todo-55de"
CANARY_TRANSCRIPT = "CANARY-legacy-transcript-0a0a"


def create(client, graph=None, name="Mine"):
    response = client.post("/api/workflows/", {"name": name, "graph": graph or basic_graph()}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_create_list_and_get(owner_client, other_client):
    body = create(owner_client)
    wid = body["id"]
    assert body["aliases"]["lead"] == f"{wid}:agent:1"
    assert body["revision"] == 1 and body["graph_version"] == 2 and body["live_generation"] == 0
    create(other_client, name="Theirs")
    listed = owner_client.get("/api/workflows/").json()
    assert [w["name"] for w in listed] == ["Mine"]
    assert listed[0]["node_count"] == 4 and listed[0]["edge_count"] == 3
    got = owner_client.get(f"/api/workflows/{wid}/").json()
    assert got["graph"] == body["graph"] and got["aliases"] == {} and got["warnings"] == []


def test_unauthenticated_requests_are_refused():
    response = APIClient().get("/api/workflows/")
    assert response.status_code in (401, 403) and response.json()["code"] == "not_authenticated"


def test_token_auth_works(owner):
    from accounts.tokens import api_token_create

    key = api_token_create(user=owner, name="test").raw_key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.post("/api/workflows/", {"name": "via token"}, format="json").status_code == 201


@pytest.mark.parametrize(
    ("method", "suffix", "payload"),
    [
        ("get", "", None),
        ("put", "", {"graph": {"nodes": [], "edges": []}, "revision": 1}),
        ("delete", "", None),
        ("post", "validate/", {"graph": {"nodes": [], "edges": []}}),
        ("get", "export/", None),
        ("post", "start/", {}),
        ("post", "stop/", {}),
        ("post", "reset/", {}),
        ("post", "subagents/", {"lead_node_id": "x", "params": {"model": "m"}}),
    ],
)
def test_another_owners_workflow_is_404_everywhere(owner_client, other_client, method, suffix, payload):
    wid = create(owner_client)["id"]
    response = getattr(other_client, method)(f"/api/workflows/{wid}/{suffix}", payload, format="json")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    missing = getattr(owner_client, method)(f"/api/workflows/{wid + 1000}/{suffix}", payload, format="json")
    assert missing.status_code == 404
    assert Workflow.objects.filter(pk=wid, revision=1, live_generation=0).exists()


def test_put_saves_and_a_stale_revision_is_409_with_the_current_one(owner_client):
    body = create(owner_client)
    wid, graph = body["id"], body["graph"]
    graph["nodes"].append(agent("new", "Second"))
    saved = owner_client.put(
        f"/api/workflows/{wid}/", {"graph": graph, "revision": 1, "name": "Renamed"}, format="json"
    )
    assert saved.status_code == 200
    assert saved.json()["revision"] == 2 and saved.json()["name"] == "Renamed"
    assert saved.json()["aliases"] == {"new": f"{wid}:agent:2"}
    stale = owner_client.put(f"/api/workflows/{wid}/", {"graph": graph, "revision": 1}, format="json")
    assert stale.status_code == 409
    assert stale.json()["code"] == "revision_conflict" and stale.json()["current_revision"] == 2


def test_invalid_topology_is_400_with_the_validators_issues(owner_client):
    body = create(owner_client)
    wid, graph = body["id"], body["graph"]
    graph["nodes"].append(node("c2", "context"))
    graph["edges"].append(context_edge("c2", f"{wid}:agent:1"))
    response = owner_client.put(f"/api/workflows/{wid}/", {"graph": graph, "revision": 1}, format="json")
    assert response.status_code == 400
    data = response.json()
    assert data["code"] == "invalid_context_topology"
    assert [(i["code"], i["node_id"]) for i in data["issues"] if i["severity"] == "error"] == [
        ("MULTIPLE_CONTEXTS", f"{wid}:agent:1")
    ]
    other = {"nodes": [node("x", "mystery")], "edges": []}
    response = owner_client.put(f"/api/workflows/{wid}/", {"graph": other, "revision": 1}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_graph"
    shape = owner_client.put(f"/api/workflows/{wid}/", {"graph": [1, 2], "revision": 1}, format="json")
    assert shape.status_code == 400 and shape.json()["code"] == "invalid_request"
    missing_revision = owner_client.put(f"/api/workflows/{wid}/", {"graph": graph}, format="json")
    assert missing_revision.status_code == 400 and "revision" in missing_revision.json()["errors"]


def test_validate_reports_without_saving(owner_client):
    wid = create(owner_client)["id"]
    draft = {
        "nodes": [agent("a"), node("c", "context"), node("m", "simpleMemory")],
        "edges": [context_edge("c", "m"), edge("m", "output-memory", "a", "input-memory")],
    }
    data = owner_client.post(f"/api/workflows/{wid}/validate/", {"graph": draft}, format="json").json()
    assert data["valid"] is False
    assert "INVALID_CONTEXT_EDGE" in [i["code"] for i in data["issues"]]
    assert "LEGACY_MEMORY_EDGE" in [w["code"] for w in data["warnings"]]
    assert data["aliases"]["a"] == f"{wid}:agent:2"  # agent:1 is the stored one; ids are never reused
    assert Workflow.objects.get(pk=wid).revision == 1
    ok = owner_client.post(f"/api/workflows/{wid}/validate/", {"graph": basic_graph()}, format="json").json()
    assert ok["valid"] is True and ok["issues"] == []


def test_delete_archives_and_removes(owner_client):
    wid = create(owner_client)["id"]
    assert owner_client.delete(f"/api/workflows/{wid}/").status_code == 204
    assert not Workflow.objects.filter(pk=wid).exists()
    assert ArchiveOutbox.objects.get().workflow_id == wid


def test_export_has_no_conversation_memory_todo_or_transcript_content(owner_client, owner):
    from conversations.store import conversation_key, save_conversation
    from memory.services import memory_item_remember, memory_namespace_get_or_create
    from providers.wire import text_message
    from workflows.todos import todos_tool

    legacy = basic_graph(with_todos=True)
    legacy["nodes"].append({"id": "old", "type": "simpleMemory", "params": {"transcript": CANARY_TRANSCRIPT}})
    legacy["nodes"].append(agent("second", "Second"))
    legacy["edges"].append(edge("old", "output-memory", "second", "input-memory"))
    body = create(owner_client, legacy)
    wid = body["id"]
    workflow = Workflow.objects.get(pk=wid)
    owner_client.post(f"/api/workflows/{wid}/start/")
    save_conversation(conversation_key(wid, 1, f"{wid}:agent:1"), [text_message("user", CANARY_CONVERSATION)])
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=f"{wid}:simpleMemory:1")
    memory_item_remember(namespace=namespace, content=CANARY_MEMORY, actor="test")
    todos_tool(workflow=workflow, node_id=f"{wid}:todos:1", arguments={"operation": "add", "text": CANARY_TODO})

    response = owner_client.get(f"/api/workflows/{wid}/export/")
    assert response.status_code == 200
    text = response.content.decode()
    for canary in (CANARY_CONVERSATION, CANARY_MEMORY, CANARY_TODO, CANARY_TRANSCRIPT):
        assert canary not in text
    document = response.json()
    assert document["format"] == "opencompany.workflow" and document["graph_version"] == 2
    assert len(document["graph"]["nodes"]) == len(body["graph"]["nodes"])
    # ... and neither does the workflow itself
    assert CANARY_TRANSCRIPT not in json.dumps(owner_client.get(f"/api/workflows/{wid}/").json())


def test_import_recanonicalizes_an_export_for_the_new_workflow(owner_client, other_client):
    wid = create(owner_client)["id"]
    document = owner_client.get(f"/api/workflows/{wid}/export/").json()
    response = other_client.post("/api/workflows/import/", document, format="json")
    assert response.status_code == 201
    imported = response.json()
    new = imported["id"]
    assert imported["aliases"][f"{wid}:agent:1"] == f"{new}:agent:1"
    assert {n["id"] for n in imported["graph"]["nodes"]} == {
        f"{new}:chatTrigger:1",
        f"{new}:agent:1",
        f"{new}:context:1",
        f"{new}:simpleMemory:1",
    }
    assert Workflow.objects.get(pk=new).owner.username == "intruder"
    bad = owner_client.post("/api/workflows/import/", {"name": "x"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_request"
    invalid = owner_client.post(
        "/api/workflows/import/", {"graph": {"nodes": [node("x", "mystery")], "edges": []}}, format="json"
    )
    assert invalid.status_code == 400 and invalid.json()["code"] == "invalid_graph"


def test_start_stop_reset(owner_client):
    wid = create(owner_client)["id"]
    started = owner_client.post(f"/api/workflows/{wid}/start/").json()
    assert started["generation"]["number"] == 1 and started["created"] is True
    assert owner_client.post(f"/api/workflows/{wid}/start/").json()["created"] is False
    assert owner_client.get(f"/api/workflows/{wid}/").json()["live_state"] == "live"
    stopped = owner_client.post(f"/api/workflows/{wid}/stop/").json()
    assert stopped["generation"]["state"] == "stopped"
    reset = owner_client.post(f"/api/workflows/{wid}/reset/", {"expected_generation": 1}, format="json").json()
    assert reset["generation"]["number"] == 2 and reset["previous_generation"] == 1 and reset["replayed"] is False
    replay = owner_client.post(f"/api/workflows/{wid}/reset/", {"expected_generation": 1}, format="json").json()
    assert replay["replayed"] is True and replay["generation"]["number"] == 2
    stale = owner_client.post(f"/api/workflows/{wid}/reset/", {"expected_generation": 0}, format="json")
    assert stale.status_code == 409 and stale.json()["current_generation"] == 2


def test_subagents_endpoint(owner_client):
    wid = create(owner_client)["id"]
    response = owner_client.post(
        f"/api/workflows/{wid}/subagents/",
        {"lead_node_id": f"{wid}:agent:1", "params": {"name": "Scout", "model": "offline-echo"}, "revision": 1},
        format="json",
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["subagent_node_id"] == f"{wid}:agent:2" and data["context_node_id"] == f"{wid}:context:2"
    assert data["revision"] == 2
    stale = owner_client.post(
        f"/api/workflows/{wid}/subagents/",
        {"lead_node_id": f"{wid}:agent:1", "params": {"model": "m"}, "revision": 1},
        format="json",
    )
    assert stale.status_code == 409
    bad_params = owner_client.post(
        f"/api/workflows/{wid}/subagents/",
        {"lead_node_id": f"{wid}:agent:1", "params": {"provider": "nope", "model": "m"}},
        format="json",
    )
    assert bad_params.status_code == 400 and bad_params.json()["code"] == "invalid_graph"
    unknown = owner_client.post(
        f"/api/workflows/{wid}/subagents/", {"lead_node_id": "nope", "params": {"model": "m"}}, format="json"
    )
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_node"


def test_graph_limits_answer_a_clear_error(owner_client, settings):
    settings.WORKFLOW_MAX_NODES = 3
    response = owner_client.post("/api/workflows/", {"name": "big", "graph": basic_graph()}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "graph_too_large"
    assert "at most 3" in response.json()["message"]


def test_openapi_schema_describes_every_endpoint(owner_client):
    response = owner_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    paths = schema["paths"]
    for path in (
        "/api/workflows/",
        "/api/workflows/{workflow_id}/",
        "/api/workflows/{workflow_id}/validate/",
        "/api/workflows/import/",
        "/api/workflows/{workflow_id}/export/",
        "/api/workflows/{workflow_id}/start/",
        "/api/workflows/{workflow_id}/stop/",
        "/api/workflows/{workflow_id}/reset/",
        "/api/workflows/{workflow_id}/subagents/",
    ):
        assert path in paths, path
    put = paths["/api/workflows/{workflow_id}/"]["put"]
    assert set(put["responses"]) >= {"200", "400", "404", "409"}
    request_schema = put["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert set(schema["components"]["schemas"][request_schema]["required"]) == {"graph", "revision"}
    assert owner_client.get("/api/docs/").status_code == 200
    # ReDoc is not served: its bundle cannot run under the strict CSP (docs/security.md), so no page offers it.
    assert owner_client.get("/api/redoc/").status_code == 404
