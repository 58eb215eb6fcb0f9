"""MCP calls on real Celery workers: Stop cancels a running call, and a worker killed mid-call leaves an `ambiguous`
call that is never sent again."""

from __future__ import annotations

import signal

import pytest

from agents.models import Firing, ToolCallResult
from agents.services.firings import firing_request_stop, firing_start
from agents.services.remote_tools import AMBIGUOUS_TEXT
from conversations.store import conversation_key, load_conversation
from mcp_nodes.calls import STOPPED_TEXT
from mcp_nodes.client import list_tools
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


def _hang_workflow(owner, server, *, timeout_seconds: int):
    connection = {"transport": "http", "url": server.url, "server": "", "headers": [], "timeout_seconds": 30}
    listing = {"tools": [t.to_dict() for t in list_tools(owner_id=owner.pk, connection=connection)]}
    params = {"url": server.url, "tools": ticked(listing, "hang"), "timeout_seconds": timeout_seconds}
    return mcp_workflow(owner, params)


def _wait_for_end(firing_id, timeout: float = 60) -> Firing:
    return wait_until(
        lambda: (f := Firing.objects.get(pk=firing_id)).is_terminal and f, timeout=timeout, what="the firing to end"
    )


def _tool_results(workflow, generation, ids) -> list[dict]:
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    return [b for m in stored for b in m["blocks"] if b["type"] == "tool_result"]


def test_stop_cancels_a_running_call_on_the_server(owner, tmp_path, http_server):
    worker = start_celery_worker(tmp_path, **WORKER_ENV)
    try:
        workflow, generation, ids = _hang_workflow(owner, http_server, timeout_seconds=60)
        firing_id = firing_start(workflow, generation, ids["lead"], 'call hang: {"seconds": 45}')
        wait_until(lambda: http_server.calls("hang"), timeout=60, what="the call to reach the server")
        firing_request_stop(firing_id=firing_id)
        firing = _wait_for_end(firing_id, timeout=30)
        wait_until(lambda: http_server.calls("hang-cancelled"), timeout=15, what="notifications/cancelled")
    finally:
        worker.stop()
    assert firing.state == Firing.State.STOPPED
    (result,) = _tool_results(workflow, generation, ids)
    assert result["is_error"] and result["content"] == STOPPED_TEXT
    assert len(http_server.calls("hang")) == 1 and http_server.calls("hang-done") == []


def test_a_worker_killed_mid_call_leaves_an_ambiguous_call_never_sent_again(owner, tmp_path, http_server):
    doomed = start_celery_worker(tmp_path, name="doomed", **WORKER_ENV)
    try:
        workflow, generation, ids = _hang_workflow(owner, http_server, timeout_seconds=6)
        firing_id = firing_start(workflow, generation, ids["lead"], 'call hang: {"seconds": 3}')
        wait_until(lambda: http_server.calls("hang"), timeout=60, what="the call to reach the server")
        record = ToolCallResult.objects.get(firing_id=firing_id)
        assert record.state == ToolCallResult.State.STARTED and record.deadline_at is not None
        doomed.kill(signal.SIGKILL)
        doomed.process.wait(timeout=10)
    finally:
        doomed.stop()
    rescuer = start_celery_worker(tmp_path, name="rescuer", beat=True, **WORKER_ENV)
    try:
        firing = _wait_for_end(firing_id, timeout=60)
    finally:
        rescuer.stop()
    assert firing.state == Firing.State.FINISHED
    record = ToolCallResult.objects.get(firing_id=firing_id)
    assert record.state == ToolCallResult.State.AMBIGUOUS and record.content == AMBIGUOUS_TEXT
    (result,) = _tool_results(workflow, generation, ids)
    assert result["is_error"] and result["content"] == AMBIGUOUS_TEXT
    assert "unknown whether" in firing.final_text
    # Sent once, never again: whatever became of it on the server (it may have had its effect), the firing is over.
    (sent,) = http_server.calls("hang")
    assert sent["arguments"] == {"seconds": 3}
