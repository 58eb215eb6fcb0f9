"""The editor's API: /api/node-types/ from the registry, test runs on generation 0, run history, generations,
duplicate — and another owner's 404 on each."""

import uuid

import pytest
from pydantic import BaseModel, ConfigDict

from agents.models import Firing, LlmStep, ToolCallResult
from conversations.models import UsageRecord
from conversations.store import list_conversations
from workflows.models import Workflow
from workflows.nodes import KIND_TOOL, Handle, NodeSpec, register_node_spec, unregister_node_spec

from .factories import basic_graph

pytestmark = pytest.mark.django_db


def _create(client, graph=None, name="Mine"):
    response = client.post("/api/workflows/", {"name": name, "graph": graph or basic_graph()}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _types(client):
    response = client.get("/api/node-types/")
    assert response.status_code == 200, response.content
    return {t["type"]: t for t in response.json()["types"]}, response.json()["providers"]


def test_node_types_describe_every_registered_spec(owner_client):
    types, providers = _types(owner_client)
    assert set(types) >= {"chatTrigger", "agent", "context", "simpleMemory", "todos"}
    agent = types["agent"]
    assert agent["label"] == "Agent" and agent["palette"] is True
    assert [(h["id"], h["kind"], h["direction"]) for h in agent["inputs"]] == [
        ("input-main", "main", "input"),
        ("input-context", "context", "input"),
        ("input-tools", "tool", "input"),
    ]
    assert next(h for h in agent["inputs"] if h["kind"] == "context")["maxConnections"] == 1
    assert agent["capabilities"]["requiresContext"] is True and agent["capabilities"]["systemManaged"] is False
    schema = agent["paramsSchema"]
    assert schema["required"] == ["model"]
    assert schema["properties"]["provider"]["enum"] == [
        "openai", "anthropic", "gemini", "openai_compatible", "offline",
        "claude_code", "codex_cli", "vertex_agent", "rlm",
    ]  # fmt: skip
    assert schema["properties"]["model"]["x-widget"] == "model"
    assert agent["newParams"]["provider"] == "offline" and agent["newParams"]["model"]
    # The Context is drawn but not offered in the palette; it has no params.
    context = types["context"]
    assert context["palette"] is False and context["capabilities"]["systemManaged"] is True
    assert context["panel"] == "context" and context["paramsSchema"]["properties"] == {}
    memory = types["simpleMemory"]
    assert memory["toolName"] == "memory" and memory["panel"] == "memory" and memory["hasResetHook"] is True
    assert memory["paramsSchema"]["properties"]["reset_policy"]["enum"] == ["keep", "clear"]
    # The agent form's catalogue: every provider, named models from the catalogue (never the "*" fallback).
    by_id = {p["id"]: p for p in providers}
    assert set(by_id) == {
        "openai", "anthropic", "gemini", "openai_compatible", "offline",
        "claude_code", "codex_cli", "vertex_agent", "rlm",
    }  # fmt: skip
    assert "gpt-4.1" in [m["id"] for m in by_id["openai"]["models"]]
    assert all(m["id"] != "*" for p in providers for m in p["models"])
    assert by_id["offline"]["configured"] is True


def test_a_type_registered_in_a_test_is_listed_with_its_form(owner_client):
    class WebhookParams(BaseModel):
        model_config = ConfigDict(extra="forbid")
        url: str
        retries: int = 3

    spec = NodeSpec(
        type="testWebhook",
        label="Webhook (test)",
        params_model=WebhookParams,
        outputs=(Handle("output-tool", KIND_TOOL),),
        tool_name="webhook",
        new_params={"url": "http://localhost/hook"},
        description="A test-only tool type.",
    )
    register_node_spec(spec)
    try:
        types, _ = _types(owner_client)
        listed = types["testWebhook"]
        assert listed["palette"] is True and listed["label"] == "Webhook (test)"
        assert listed["paramsSchema"]["properties"]["retries"]["default"] == 3
        assert listed["outputs"] == [
            {"id": "output-tool", "kind": "tool", "direction": "output", "maxConnections": None, "label": "tool"}
        ]
        assert listed["newParams"] == {"url": "http://localhost/hook"}
    finally:
        unregister_node_spec("testWebhook")
    types, _ = _types(owner_client)
    assert "testWebhook" not in types


def test_node_types_need_a_login(api_client):
    assert api_client.get("/api/node-types/").status_code in (401, 403)


def test_a_test_run_answers_on_generation_zero_and_stores_no_conversation(
    owner_client, settings, django_capture_on_commit_callbacks
):
    settings.AGENT_EXECUTION_MODE = "inline"
    body = _create(owner_client)
    wid = body["id"]
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post(f"/api/workflows/{wid}/test-run/", {"prompt": "hello test"}, format="json")
    assert response.status_code == 202, response.content
    started = response.json()
    detail = owner_client.get(started["run_url"]).json()
    assert detail["state"] == "finished", detail
    assert detail["generation"] == 0 and detail["kind"] == "test_run"
    assert detail["answer"] and len(detail["steps"]) == 1 and detail["steps"][0]["state"] == "persisted"
    workflow = Workflow.objects.get(pk=wid)
    assert list(list_conversations(workflow)) == []
    assert workflow.live_generation == 0  # nothing admitted
    listed = owner_client.get(f"/api/workflows/{wid}/runs/?generation=0").json()
    assert [r["id"] for r in listed] == [started["firing_id"]]


def test_a_test_run_refuses_a_graph_without_an_answering_agent(owner_client):
    wid = _create(owner_client, graph={"nodes": [], "edges": []})["id"]
    response = owner_client.post(f"/api/workflows/{wid}/test-run/", {"prompt": "hi"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "no_answering_agent"


def _failed_firing(workflow, *, code: str, ambiguous_step: bool = False) -> Firing:
    firing = Firing.objects.create(
        workflow=workflow,
        generation=1,
        agent_node_id=f"{workflow.pk}:agent:1",
        prompt="why did this fail?",
        state=Firing.State.FAILED,
        end_reason="failed",
        error_code=code,
        error_message="The provider said no.",
        agent_config={"name": "Lead", "provider": "openai", "model": "gpt-4.1"},
        iteration=1,
    )
    step = LlmStep.objects.create(
        firing=firing,
        iteration=1,
        state=LlmStep.State.AMBIGUOUS if ambiguous_step else LlmStep.State.FAILED,
        error_code="worker_lost" if ambiguous_step else code.removeprefix("provider_"),
        duration_ms=1234,
    )
    UsageRecord.objects.create(
        idempotency_key=f"llm-step:{step.pk}",
        owner_id=workflow.owner_id,
        workflow_id=workflow.pk,
        generation=1,
        agent_node_id=firing.agent_node_id,
        kind="llm",
        provider="openai",
        model="gpt-4.1",
        input_tokens=10,
        output_tokens=0,
        cost="0.000020",
        outcome="ambiguous" if ambiguous_step else "error",
    )
    return firing


def test_run_history_reports_a_failed_firings_code_steps_and_cost(owner_client):
    wid = _create(owner_client)["id"]
    workflow = Workflow.objects.get(pk=wid)
    failed = _failed_firing(workflow, code="provider_rate_limited")
    lost = _failed_firing(workflow, code="timed_out", ambiguous_step=True)
    ToolCallResult.objects.create(
        firing=failed, iteration=1, tool_call_id="c1", name="memory", content="boom: bad arguments", is_error=True
    )
    listed = owner_client.get(f"/api/workflows/{wid}/runs/").json()
    by_id = {row["id"]: row for row in listed}
    assert by_id[str(failed.pk)]["error_code"] == "provider_rate_limited"
    assert by_id[str(failed.pk)]["failed_steps"] == 1 and by_id[str(failed.pk)]["tool_calls"] == 1
    assert by_id[str(lost.pk)]["error_code"] == "timed_out"
    detail = owner_client.get(f"/api/workflows/{wid}/runs/{lost.pk}/").json()
    assert detail["steps"][0]["state"] == "ambiguous" and detail["steps"][0]["billed"] == "ambiguous"
    assert detail["steps"][0]["duration_ms"] == 1234 and detail["cost"] == "0.000020"
    detail = owner_client.get(f"/api/workflows/{wid}/runs/{failed.pk}/").json()
    assert detail["tool_calls"][0]["error_preview"] == "boom: bad arguments"
    assert owner_client.get(f"/api/workflows/{wid}/runs/{uuid.uuid4()}/").status_code == 404
    assert owner_client.get(f"/api/workflows/{wid}/runs/not-a-uuid/").status_code == 404


def test_a_delegation_is_nested_under_its_lead(owner_client, settings):
    wid = _create(owner_client)["id"]
    workflow = Workflow.objects.get(pk=wid)
    lead = _failed_firing(workflow, code="provider_server_error")
    child = Firing.objects.create(
        workflow=workflow, generation=1, agent_node_id="x", prompt="sub task", parent=lead, depth=1, state="finished"
    )
    ToolCallResult.objects.create(
        firing=lead, iteration=1, tool_call_id="c2", name="helper", content="done", child_firing=child
    )
    listed = owner_client.get(f"/api/workflows/{wid}/runs/").json()
    assert [row["id"] for row in listed] == [str(lead.pk)]  # teammates are not top-level runs
    assert listed[0]["delegations"] == 1
    detail = owner_client.get(f"/api/workflows/{wid}/runs/{lead.pk}/").json()
    assert detail["delegations"][0]["id"] == str(child.pk)
    assert detail["tool_calls"][0]["delegated_to"] == str(child.pk)


def test_generations_and_duplicate(owner_client):
    wid = _create(owner_client)["id"]
    assert owner_client.get(f"/api/workflows/{wid}/generations/").json() == []
    owner_client.post(f"/api/workflows/{wid}/start/")
    rows = owner_client.get(f"/api/workflows/{wid}/generations/").json()
    assert [(g["number"], g["state"]) for g in rows] == [(1, "live")]
    copy = owner_client.post(f"/api/workflows/{wid}/duplicate/", {}, format="json")
    assert copy.status_code == 201
    body = copy.json()
    assert body["name"] == "Mine (copy)" and body["live_generation"] == 0
    assert all(node["id"].startswith(f"{body['id']}:") for node in body["graph"]["nodes"])
    assert len(body["graph"]["nodes"]) == 4 and len(body["graph"]["edges"]) == 3


def test_another_owner_gets_404_on_every_new_endpoint(owner_client, other_client, settings):
    settings.AGENT_EXECUTION_MODE = "inline"
    wid = _create(owner_client)["id"]
    firing = _failed_firing(Workflow.objects.get(pk=wid), code="provider_rate_limited")
    for method, path, body in [
        ("post", f"/api/workflows/{wid}/test-run/", {"prompt": "hi"}),
        ("get", f"/api/workflows/{wid}/runs/", None),
        ("get", f"/api/workflows/{wid}/runs/{firing.pk}/", None),
        ("get", f"/api/workflows/{wid}/generations/", None),
        ("post", f"/api/workflows/{wid}/duplicate/", {}),
    ]:
        client_call = getattr(other_client, method)
        response = client_call(path, body, format="json") if body is not None else client_call(path)
        assert response.status_code == 404, (path, response.status_code)
        assert response.json()["code"] == "not_found"
    assert Firing.objects.filter(workflow_id=wid).count() == 1  # the refused test run fired nothing
    assert Workflow.objects.count() == 1
