"""Tool calls that ask first (docs/tools.md#approvals), end to end in this process: the policy per tool, the firing
parked with nothing held, Approve (the call made once), Deny (the model told why), the timeout, Stop and Edit
while a call waits, the lane, two decisions racing, another owner's 404, and the stored conversation replayed to
every provider's strict fake after a denial."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import Firing, ToolApproval, ToolCallResult
from agents.services.approval_decisions import tool_approval_decide
from agents.services.firings import firing_start
from agents.services.watchdog import watchdog_sweep
from conversations.models import FiringLease
from conversations.store import conversation_key, load_conversation
from core.errors import ConflictError
from mcp_nodes.client import list_tools
from providers import ToolDefinition
from tests.fakes import Text, Turn
from tests.mcp_nodes.helpers import mcp_workflow, ticked
from tests.race import Competitor, run_before, wait_until_waiting_on_a_lock

from .test_replay import FAKES, step

pytestmark = pytest.mark.django_db(transaction=True)


def _listing(owner, server) -> dict:
    connection = {"transport": "http", "url": server.url, "server": "", "headers": [], "timeout_seconds": 30}
    return {"tools": [t.to_dict() for t in list_tools(owner_id=owner.pk, connection=connection)]}


def _params(owner, server, *names, policy=None, **more) -> dict:
    """The tools ticked with the defaults their annotations suggest (`policy` None) or one policy for all."""
    return {"url": server.url, "tools": ticked(_listing(owner, server), *names, policy=policy), **more}


def _send(client, workflow, text: str):
    return client.post(f"/api/workflows/{workflow.pk}/chat/messages/", {"text": text}, format="json")


def _thread(client, workflow) -> dict:
    return client.get(f"/api/workflows/{workflow.pk}/chat/").json()


def _decide(client, approval_id, decision: str, reason: str = "", **headers):
    return client.post(
        f"/api/tool-approvals/{approval_id}/decision/",
        {"decision": decision, "reason": reason},
        format="json",
        **headers,
    )


def _results(workflow, generation, ids) -> list[dict]:
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    return [b for m in stored for b in m["blocks"] if b["type"] == "tool_result"]


def _parked(owner, owner_client, http_server, text='call wipe: {"target": "the old logs"}', **params):
    workflow, generation, ids = mcp_workflow(owner, _params(owner, http_server, "echo", "wipe", **params))
    sent = _send(owner_client, workflow, text)
    assert sent.status_code == 201, sent.content
    firing = Firing.objects.get(workflow=workflow)
    return workflow, generation, ids, firing


# --- the policy ------------------------------------------------------------------------------------------------


def test_read_only_tools_run_and_the_rest_ask_first_by_default_and_never_is_not_offered(owner, inline, http_server):
    tools = ticked(_listing(owner, http_server), "echo", "wipe", "fail", "measure", policy=None)
    for tool in tools:
        if tool["name"] == "measure":
            tool["policy"] = "never"
    workflow, generation, ids = mcp_workflow(owner, {"url": http_server.url, "tools": tools})
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )
    bindings = {b["name"]: b for b in firing.tool_bindings}
    assert set(bindings) == {"echo", "wipe", "fail"}  # `never`: the model is not offered it
    assert not bindings["echo"].get("approval")  # readOnlyHint
    assert bindings["wipe"]["approval"] is True  # destructiveHint
    assert bindings["fail"]["approval"] is True  # no annotations


def test_a_policy_that_is_not_one_of_the_three_is_a_graph_error(owner_client, owner):
    from workflows.graph.validate import validate_workflow_graph

    node = {"id": "mcp", "type": "mcpServer", "params": {"url": "", "tools": [{"name": "t", "policy": "sometimes"}]}}
    issues = validate_workflow_graph({"nodes": [node], "edges": []})
    assert any(i.code == "INVALID_PARAMS" and "policy" in i.field for i in issues), issues
    types = owner_client.get("/api/node-types/").json()
    mcp = next(t for t in types["types"] if t["type"] == "mcpServer")
    schema = json.dumps(mcp["paramsSchema"])
    assert '"run", "ask", "never"' in schema  # the panel reads the choices from here


# --- parking, approve, deny ------------------------------------------------------------------------------------


def test_a_call_that_asks_first_parks_the_firing_and_approve_makes_it_once(
    owner, owner_client, inline, http_server, capture_events
):
    prompt = 'call echo: {"text": "before"}\ncall wipe: {"target": "the old logs", "keep": {"days": 7}}'
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server, prompt)
    assert firing.state == Firing.State.AWAITING_APPROVAL
    # The call that may run ran; the one that asks first did not reach the server.
    assert http_server.calls() == [{"tool": "echo", "arguments": {"text": "before"}}]
    assert not FiringLease.objects.filter(workflow_id=workflow.pk).exists()  # no lease held while parked
    approval = ToolApproval.objects.get(firing=firing)
    assert approval.state == "pending" and approval.name == "wipe"
    assert json.loads(approval.arguments) == {"target": "the old logs", "keep": {"days": 7}}
    # The page hears of it with metadata only, and the snapshot carries the card.
    (event,) = capture_events.events("run.approval")
    assert event == {
        "type": "run.approval",
        "workflow_id": workflow.pk,
        "approval_id": str(approval.pk),
        "state": "pending",
        "name": "wipe",
    }
    thread = _thread(owner_client, workflow)
    (card,) = thread["active_run"]["approvals"]
    assert card["tool"] == "wipe" and card["server"] == http_server.url and card["agent_name"] == "Lead"
    assert json.loads(card["arguments"]) == {"target": "the old logs", "keep": {"days": 7}}

    decided = _decide(owner_client, approval.pk, "approve")
    assert decided.status_code == 200, decided.content
    assert decided.json()["state"] == "approved" and decided.json()["decided_by"] == owner.get_username()
    firing.refresh_from_db()
    assert firing.state == Firing.State.FINISHED
    assert http_server.calls("wipe") == [{"tool": "wipe", "arguments": {"target": "the old logs"}}]  # the server's log
    echo, wiped = _results(workflow, generation, ids)
    assert wiped["content"] == "wiped the old logs" and not wiped["is_error"]
    assert ToolCallResult.objects.get(firing=firing, name="wipe").state == "completed"
    # Run history: who decided what, when.
    detail = owner_client.get(f"/api/workflows/{workflow.pk}/runs/{firing.pk}/").json()
    (decision,) = detail["approvals"]
    assert decision["state"] == "approved" and decision["decided_by"] == owner.get_username()
    assert decision["decided_at"]
    from django.test import Client

    browser = Client()
    browser.force_login(owner)
    history = browser.get(f"/workflows/{workflow.pk}/runs/{firing.pk}/").content.decode()
    assert "Asked the owner first" in history and f"approved by {owner.get_username()}" in history
    # A second Approve (another tab) is 409 with the decision that stands, and calls nothing.
    again = _decide(owner_client, approval.pk, "deny", "too late")
    assert again.status_code == 409 and again.json()["code"] == "already_decided"
    assert again.json()["approval"]["state"] == "approved"
    assert len(http_server.calls("wipe")) == 1


def test_deny_tells_the_model_the_owner_declined_with_the_reason(owner, owner_client, inline, http_server):
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server)
    approval = ToolApproval.objects.get(firing=firing)
    assert _decide(owner_client, approval.pk, "deny", "Those logs are evidence.").status_code == 200
    firing.refresh_from_db()
    assert firing.state == Firing.State.FINISHED
    assert http_server.calls("wipe") == []
    (result,) = _results(workflow, generation, ids)
    assert result["is_error"] and result["content"] == (
        "Not run: the owner declined this call. Their reason: Those logs are evidence."
    )
    assert "Those logs are evidence." in firing.final_text  # the offline agent reads the result back
    reply = _thread(owner_client, workflow)["messages"][-1]
    assert reply["role"] == "assistant" and "Those logs are evidence." in reply["text"]
    assert reply["run"]["approvals"][0]["state"] == "denied"


def test_the_stored_conversation_replays_to_every_providers_strict_fake_after_a_denial(
    owner, owner_client, inline, http_server
):
    prompt = 'call echo: {"text": "tea"}\ncall wipe: {"target": "the kettle"}'
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server, prompt)
    _decide(owner_client, ToolApproval.objects.get(firing=firing).pk, "deny", "Not the kettle.")
    firing.refresh_from_db()
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    tools = [ToolDefinition(b["name"], b["description"], b["parameters"]) for b in firing.tool_bindings]
    messages = [*stored, {"role": "user", "blocks": [{"type": "text", "text": "And now?"}]}]
    for provider, make in FAKES.items():
        fake = make()
        try:
            fake.push(Turn([Text("Understood.")]))
            result = step(provider, fake, messages, tools=tools)
            sent = str(fake.requests[-1].body)
        finally:
            fake.close()
        assert result.message["blocks"][0]["text"] == "Understood.", provider
        assert "the owner declined this call. Their reason: Not the kettle." in sent, provider


# --- timeout, Stop, edit, the lane ------------------------------------------------------------------------------


def test_no_decision_before_the_timeout_counts_as_deny_and_says_so(owner, owner_client, inline, http_server, settings):
    settings.TOOL_APPROVAL_TIMEOUT_SECONDS = 3600
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server)
    approval = ToolApproval.objects.get(firing=firing)
    watchdog_sweep()
    assert ToolApproval.objects.get(pk=approval.pk).state == "pending"  # not yet due
    ToolApproval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    report = watchdog_sweep()
    assert report["approvals_expired"] == 1
    approval.refresh_from_db()
    firing.refresh_from_db()
    assert approval.state == "expired" and approval.decided_by is None
    assert firing.state == Firing.State.FINISHED and http_server.calls("wipe") == []
    (result,) = _results(workflow, generation, ids)
    assert result["content"] == (
        "Not run: the owner did not approve this call. No decision within 1 hour: counted as declined."
    )
    late = _decide(owner_client, approval.pk, "approve")
    assert late.status_code == 409 and late.json()["approval"]["state"] == "expired"
    assert http_server.calls("wipe") == []


def test_stop_while_a_call_waits_ends_the_answer_at_once(owner, owner_client, inline, http_server):
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server)
    run_id = _thread(owner_client, workflow)["active_run"]["id"]
    stopped = owner_client.post(f"/api/workflows/{workflow.pk}/chat/runs/{run_id}/stop/")
    assert stopped.status_code == 200 and stopped.json()["state"] == "stopped"
    firing.refresh_from_db()
    assert firing.state == Firing.State.STOPPED
    (result,) = _results(workflow, generation, ids)
    assert result["content"] == "Not run: the owner stopped this answer."
    approval = ToolApproval.objects.get(firing=firing)
    assert approval.state == "cancelled"
    late = _decide(owner_client, approval.pk, "approve")
    assert late.status_code == 409 and late.json()["approval"]["state"] == "cancelled"
    assert http_server.calls("wipe") == []


def test_a_new_message_while_a_call_waits_is_refused_and_an_edit_ends_the_run_first(
    owner, owner_client, inline, http_server
):
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server)
    refused = _send(owner_client, workflow, "hello?")
    assert refused.status_code == 409 and refused.json()["code"] == "approval_pending"
    assert "Approve or deny it, or press Stop" in refused.json()["message"]
    thread = _thread(owner_client, workflow)
    user_message = thread["messages"][-1]
    assert user_message["can_edit"]  # the owner may leave the waiting answer by an edit
    edited = owner_client.post(
        f"/api/workflows/{workflow.pk}/chat/messages/{user_message['id']}/edit/",
        {"text": 'call echo: {"text": "instead"}', "expected_revision": thread["revision"]},
        format="json",
    )
    assert edited.status_code == 201, edited.content
    firing.refresh_from_db()
    assert firing.state == Firing.State.STOPPED
    assert ToolApproval.objects.get(firing=firing).state == "cancelled"
    assert http_server.calls("wipe") == []
    assert http_server.calls("echo") == [{"tool": "echo", "arguments": {"text": "instead"}}]


# --- decisions: races, ownership, idempotency -----------------------------------------------------------------


def test_approve_and_deny_racing_give_one_outcome(owner, owner_client, inline, http_server):
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server)
    approval = ToolApproval.objects.get(firing=firing)
    deny = Competitor(
        lambda: tool_approval_decide(approval_id=approval.pk, owner=owner, decision="deny", reason="no"), name="deny"
    )

    def deny_meanwhile(*_args):
        # The approve has written its decision and holds the row; the deny reaches it now and must wait.
        deny.start()
        wait_until_waiting_on_a_lock(pid=deny.pid)

    with run_before("agents.services.approval_decisions._continue_after_decision", deny_meanwhile):
        tool_approval_decide(approval_id=approval.pk, owner=owner, decision="approve")
    with pytest.raises(ConflictError) as lost:
        deny.result()
    assert lost.value.code == "already_decided" and lost.value.extra["approval"]["state"] == "approved"
    approval.refresh_from_db()
    assert approval.state == "approved" and approval.reason == ""
    assert http_server.calls("wipe") == [{"tool": "wipe", "arguments": {"target": "the old logs"}}]


def test_another_owner_gets_404_on_the_card_and_the_decision(owner, owner_client, other_owner, inline, http_server):
    from rest_framework.test import APIClient

    workflow, generation, ids, firing = _parked(owner, owner_client, http_server)
    approval = ToolApproval.objects.get(firing=firing)
    api_client = APIClient()
    api_client.force_authenticate(other_owner)
    assert api_client.get(f"/api/tool-approvals/{approval.pk}/").status_code == 404
    for decision in ("approve", "deny"):
        answer = _decide(api_client, approval.pk, decision, HTTP_IDEMPOTENCY_KEY=f"k-{decision}")
        assert answer.status_code == 404, answer.content
    assert api_client.get(f"/api/workflows/{workflow.pk}/chat/").status_code == 404
    assert owner_client.get(f"/api/tool-approvals/{approval.pk}/").json()["state"] == "pending"
    assert owner_client.get("/api/tool-approvals/not-an-id/").status_code == 404


def test_a_retried_decision_with_its_idempotency_key_replays_the_first_answer(owner, owner_client, inline, http_server):
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server)
    approval = ToolApproval.objects.get(firing=firing)
    first = _decide(owner_client, approval.pk, "approve", HTTP_IDEMPOTENCY_KEY="decide-1")
    second = _decide(owner_client, approval.pk, "approve", HTTP_IDEMPOTENCY_KEY="decide-1")
    assert first.status_code == second.status_code == 200
    assert second["Idempotency-Replayed"] == "true" and second.json()["id"] == first.json()["id"]
    assert len(http_server.calls("wipe")) == 1


# --- teammates ---------------------------------------------------------------------------------------------------


def test_a_teammates_call_that_asks_first_shows_in_the_owners_chat_and_the_answer_waits_for_it(
    owner, owner_client, inline, http_server
):
    from tests.agents.factories import agent_node, edge, started_workflow
    from tests.mcp_nodes.helpers import mcp_node

    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Lead"),
        {"id": "ctx", "type": "context", "params": {}},
        agent_node("helper", "Helper"),
        {"id": "ctx2", "type": "context", "params": {}},
        mcp_node(**_params(owner, http_server, "wipe")),
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
        edge("helper", "output-tool", "lead", "input-tools"),
        edge("ctx2", "output-context", "helper", "input-context"),
        edge("mcp", "output-tool", "helper", "input-tools"),
    ]
    workflow, generation, ids = started_workflow(owner, nodes, edges)
    task = json.dumps({"task": 'call wipe: {"target": "the old logs"}'})
    assert _send(owner_client, workflow, f"call helper: {task}").status_code == 201
    lead = Firing.objects.get(workflow=workflow, parent__isnull=True)
    helper = Firing.objects.get(workflow=workflow, parent=lead)
    assert lead.state == Firing.State.WAITING and helper.state == Firing.State.AWAITING_APPROVAL
    thread = _thread(owner_client, workflow)
    (card,) = thread["active_run"]["approvals"]  # under the answering run, naming the teammate
    assert card["teammate"] is True and card["agent_name"] == "Helper" and card["tool"] == "wipe"
    assert _send(owner_client, workflow, "and?").json()["code"] == "approval_pending"
    assert _decide(owner_client, card["id"], "approve").status_code == 200
    lead.refresh_from_db()
    assert lead.state == Firing.State.FINISHED and "wiped the old logs" in lead.final_text
    assert http_server.calls("wipe") == [{"tool": "wipe", "arguments": {"target": "the old logs"}}]
    reply = _thread(owner_client, workflow)["messages"][-1]
    assert reply["run"]["approvals"][0]["state"] == "approved" and reply["run"]["approvals"][0]["teammate"]


def test_a_webhook_delivery_while_a_card_waits_waits_too(owner, owner_client, inline, http_server):
    """The lane is taken while a card waits: a trigger's turn waits for the next sweep, as behind any answer, and is
    not failed."""
    from django.test import Client

    from tests.agents.factories import agent_node, edge, started_workflow
    from tests.mcp_nodes.helpers import mcp_node
    from triggers.models import TriggerFire

    hook_params = {"name": "Tickets", "message": "Ticket: {body.title}", "signing_secret": ""}
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        {"id": "hook", "type": "webhookTrigger", "params": hook_params},
        agent_node("lead", "Lead"),
        {"id": "ctx", "type": "context", "params": {}},
        mcp_node(**_params(owner, http_server, "wipe")),
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("hook", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
        edge("mcp", "output-tool", "lead", "input-tools"),
    ]
    workflow, generation, ids = started_workflow(owner, nodes, edges)
    url = owner_client.post(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/").json()["url"]
    assert _send(owner_client, workflow, 'call wipe: {"target": "the old logs"}').status_code == 201
    delivered = Client().post(url[url.index("/hooks/") :], {"title": "Printer"}, content_type="application/json")
    assert delivered.status_code == 202 and delivered.json()["state"] == "waiting"
    assert TriggerFire.objects.get().state == "waiting"


def test_switching_versions_while_a_card_waits_ends_the_run_first(owner, owner_client, inline, http_server):
    workflow, generation, ids = mcp_workflow(owner, _params(owner, http_server, "echo", "wipe"))
    assert _send(owner_client, workflow, 'call echo: {"text": "first version"}').status_code == 201
    first = _thread(owner_client, workflow)["messages"][0]
    edited = owner_client.post(
        f"/api/workflows/{workflow.pk}/chat/messages/{first['id']}/edit/",
        {"text": 'call wipe: {"target": "the old logs"}'},
        format="json",
    )
    assert edited.status_code == 201, edited.content
    waiting = Firing.objects.get(workflow=workflow, state=Firing.State.AWAITING_APPROVAL)
    thread = _thread(owner_client, workflow)
    version = thread["messages"][0]
    assert version["siblings"]["previous_id"] == first["id"]
    switched = owner_client.post(
        f"/api/workflows/{workflow.pk}/chat/messages/{first['id']}/switch/",
        {"expected_revision": thread["revision"]},
        format="json",
    )
    assert switched.status_code == 200, switched.content
    waiting.refresh_from_db()
    assert waiting.state == Firing.State.STOPPED and http_server.calls("wipe") == []
    assert ToolApproval.objects.get(firing=waiting).state == "cancelled"
    shown = _thread(owner_client, workflow)["messages"]
    assert shown[0]["id"] == first["id"] and "echo: first version" in shown[-1]["text"]


def test_several_calls_in_one_step_get_a_card_each_and_the_firing_continues_once_all_are_decided(
    owner, owner_client, inline, http_server
):
    prompt = 'call wipe: {"target": "the old logs"}\ncall wipe: {"target": "the backups"}'
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server, prompt)
    cards = _thread(owner_client, workflow)["active_run"]["approvals"]
    assert [json.loads(c["arguments"])["target"] for c in cards] == ["the old logs", "the backups"]
    assert _decide(owner_client, cards[0]["id"], "approve").status_code == 200
    firing.refresh_from_db()
    # The approved call is made; the answer waits for the other decision.
    assert firing.state == Firing.State.AWAITING_APPROVAL
    assert http_server.calls("wipe") == [{"tool": "wipe", "arguments": {"target": "the old logs"}}]
    assert _send(owner_client, workflow, "and?").json()["code"] == "approval_pending"
    assert _decide(owner_client, cards[1]["id"], "deny", "Not the backups.").status_code == 200
    firing.refresh_from_db()
    assert firing.state == Firing.State.FINISHED
    first, second = _results(workflow, generation, ids)
    assert first["content"] == "wiped the old logs"
    assert second["content"] == "Not run: the owner declined this call. Their reason: Not the backups."
    assert len(http_server.calls("wipe")) == 1


def test_a_reset_while_a_card_waits_ends_the_answer_and_closes_the_call(owner, owner_client, inline, http_server):
    workflow, generation, ids, firing = _parked(owner, owner_client, http_server)
    reset = owner_client.post(f"/api/workflows/{workflow.pk}/reset/", {}, format="json")
    assert reset.status_code == 200, reset.content
    firing.refresh_from_db()
    assert firing.state == Firing.State.FAILED and firing.error_code == "reset"
    approval = ToolApproval.objects.get(firing=firing)
    assert approval.state == "cancelled"
    late = _decide(owner_client, approval.pk, "approve")
    assert late.status_code == 409 and late.json()["approval"]["state"] == "cancelled"
    assert http_server.calls("wipe") == []
