"""Tool calls that ask first, on real Celery workers: a parked firing holds no worker (a pool of one serves another
turn while the call waits), and a decision survives a worker lost after it (its message lost too: the watchdog
continues the firing, the call is made once) or during the approved call (`ambiguous`, never sent again)."""

from __future__ import annotations

import signal

import pytest

from agents.models import Firing, ToolApproval, ToolCallResult
from agents.services.approval_decisions import tool_approval_decide
from agents.services.firings import firing_start
from agents.services.remote_tools import AMBIGUOUS_TEXT
from conversations.store import conversation_key, load_conversation
from mcp_nodes.client import list_tools
from tests.broker import hold_broker
from tests.mcp_nodes.helpers import mcp_workflow, ticked
from tests.processes import start_celery_worker
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WORKER_ENV = {
    "MCP_HTTP_ALLOWED_HOSTS": "127.0.0.1",
    "MCP_CALL_LOST_GRACE_SECONDS": "1",
    "AGENT_WATCHDOG_INTERVAL_SECONDS": "1",
    "AGENT_STEP_HEARTBEAT_SECONDS": "0.5",
    "AGENT_STEP_LOST_AFTER_SECONDS": "3",
    "AGENT_PERSIST_GRACE_SECONDS": "2",
}


def _workflow(owner, server, *names, timeout_seconds: int = 30):
    connection = {"transport": "http", "url": server.url, "server": "", "headers": [], "timeout_seconds": 30}
    listing = {"tools": [t.to_dict() for t in list_tools(owner_id=owner.pk, connection=connection)]}
    # The defaults the annotations suggest: `echo` is read-only (runs), `wipe` and `hang` ask first.
    params = {"url": server.url, "tools": ticked(listing, *names, policy=None), "timeout_seconds": timeout_seconds}
    return mcp_workflow(owner, params)


def _start(workflow, generation, ids, prompt: str):
    return firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=prompt)


def _state(firing_id) -> str:
    return Firing.objects.filter(pk=firing_id).values_list("state", flat=True).first()


def _wait_for(firing_id, state: str, timeout: float = 60) -> None:
    wait_until(lambda: _state(firing_id) == state, timeout=timeout, what=f"the firing to be {state}")


def _results(workflow, generation, ids) -> list[dict]:
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    return [b for m in stored for b in m["blocks"] if b["type"] == "tool_result"]


def test_a_parked_firing_holds_no_worker(owner, tmp_path, http_server):
    worker = start_celery_worker(tmp_path, concurrency=1, **WORKER_ENV)
    try:
        waiting = _workflow(owner, http_server, "wipe")
        parked = _start(*waiting, 'call wipe: {"target": "the old logs"}')
        _wait_for(parked, Firing.State.AWAITING_APPROVAL)
        # The pool's one process is free: another agent's turn runs to its end while the call waits.
        other = _workflow(owner, http_server, "echo")
        answered = _start(*other, 'call echo: {"text": "meanwhile"}')
        _wait_for(answered, Firing.State.FINISHED)
        assert _state(parked) == Firing.State.AWAITING_APPROVAL and http_server.calls("wipe") == []
        tool_approval_decide(approval_id=ToolApproval.objects.get(firing_id=parked).pk, owner=owner, decision="approve")
        _wait_for(parked, Firing.State.FINISHED)
    finally:
        worker.stop()
    assert http_server.calls("wipe") == [{"tool": "wipe", "arguments": {"target": "the old logs"}}]
    (result,) = _results(*waiting)
    assert result["content"] == "wiped the old logs"


def test_an_approval_whose_worker_and_message_were_lost_makes_the_call_once(
    owner, tmp_path, http_server, monkeypatch, settings
):
    doomed = start_celery_worker(tmp_path, name="doomed", **WORKER_ENV)
    try:
        workflow, generation, ids = _workflow(owner, http_server, "wipe")
        firing_id = _start(workflow, generation, ids, 'call wipe: {"target": "the old logs"}')
        _wait_for(firing_id, Firing.State.AWAITING_APPROVAL)
        doomed.kill(signal.SIGKILL)
        doomed.process.wait(timeout=10)
    finally:
        doomed.stop()
    # Approved while no worker runs, and the persist its commit sends never reaches one (the broker lost it).
    lost = hold_broker(monkeypatch, settings)
    approval = ToolApproval.objects.get(firing_id=firing_id)
    tool_approval_decide(approval_id=approval.pk, owner=owner, decision="approve")
    assert lost == [("agent.persist_turn", (str(firing_id), 1))]
    monkeypatch.undo()
    assert http_server.calls("wipe") == [] and _state(firing_id) == Firing.State.AWAITING_APPROVAL
    rescuer = start_celery_worker(tmp_path, name="rescuer", beat=True, **WORKER_ENV)
    try:
        _wait_for(firing_id, Firing.State.FINISHED)
    finally:
        rescuer.stop()
    # The watchdog continued the firing from the durable decision: the call was made, once.
    assert http_server.calls("wipe") == [{"tool": "wipe", "arguments": {"target": "the old logs"}}]
    (result,) = _results(workflow, generation, ids)
    assert result["content"] == "wiped the old logs"


def test_a_worker_killed_during_the_approved_call_leaves_it_ambiguous_never_sent_again(owner, tmp_path, http_server):
    doomed = start_celery_worker(tmp_path, name="doomed", **WORKER_ENV)
    try:
        workflow, generation, ids = _workflow(owner, http_server, "hang", timeout_seconds=6)
        firing_id = _start(workflow, generation, ids, 'call hang: {"seconds": 3}')
        _wait_for(firing_id, Firing.State.AWAITING_APPROVAL)
        approval = ToolApproval.objects.get(firing_id=firing_id)
        tool_approval_decide(approval_id=approval.pk, owner=owner, decision="approve")
        wait_until(lambda: http_server.calls("hang"), timeout=60, what="the approved call to reach the server")
        record = ToolCallResult.objects.get(firing_id=firing_id)
        assert record.state == ToolCallResult.State.STARTED
        doomed.kill(signal.SIGKILL)
        doomed.process.wait(timeout=10)
    finally:
        doomed.stop()
    rescuer = start_celery_worker(tmp_path, name="rescuer", beat=True, **WORKER_ENV)
    try:
        _wait_for(firing_id, Firing.State.FINISHED)
    finally:
        rescuer.stop()
    record = ToolCallResult.objects.get(firing_id=firing_id)
    assert record.state == ToolCallResult.State.AMBIGUOUS and record.content == AMBIGUOUS_TEXT
    (result,) = _results(workflow, generation, ids)
    assert result["is_error"] and result["content"] == AMBIGUOUS_TEXT
    assert ToolApproval.objects.get(pk=approval.pk).state == "approved"
    (sent,) = http_server.calls("hang")  # approved once, sent once, never again
    assert sent["arguments"] == {"seconds": 3}
