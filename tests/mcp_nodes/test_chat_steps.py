"""The chat's step line names the MCP server and the tool while a call runs ("Calling echo on host/mcp…") and says
how it ended, in the `run.step` events the page applies and in the snapshot it renders from."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from agents.models import Firing
from mcp_nodes.client import list_tools
from tests.mcp_nodes.helpers import mcp_workflow, ticked

pytestmark = pytest.mark.django_db(transaction=True)


def _listing(owner, connection: dict) -> dict:
    tools = list_tools(owner_id=owner.pk, connection={"timeout_seconds": 30, "headers": [], **connection})
    return {"tools": [t.to_dict() for t in tools]}


def _send(owner_client, workflow, text: str) -> list[dict]:
    sent = owner_client.post(f"/api/workflows/{workflow.pk}/chat/messages/", {"text": text}, format="json")
    assert sent.status_code == 201, sent.content
    assert Firing.objects.get(workflow=workflow).state == Firing.State.FINISHED
    return owner_client.get(f"/api/workflows/{workflow.pk}/chat/").json()["messages"][-1]["run"]["steps"]


def _step_events(capture_events) -> list[tuple[str, str, str]]:
    return [(e["name"], e["phase"], e["label"]) for e in capture_events.events("run.step")]


def test_http_steps_name_the_server_and_the_tool_while_running_and_after(
    owner, owner_client, inline, http_server, capture_events
):
    listing = _listing(owner, {"transport": "http", "url": http_server.url, "server": ""})
    workflow, _, _ = mcp_workflow(owner, {"url": http_server.url, "tools": ticked(listing, "echo", "fail")})
    steps = _send(owner_client, workflow, 'call echo: {"text": "hi"}\ncall fail: {"reason": "none"}')
    server = urlsplit(http_server.url).netloc + "/mcp"
    assert _step_events(capture_events) == [
        ("echo", "started", f"Calling echo on {server}…"),
        ("echo", "finished", f"Called echo on {server}"),
        ("fail", "started", f"Calling fail on {server}…"),
        ("fail", "finished", f"fail on {server} failed"),
    ]
    assert [(s["name"], s["label"], s["is_error"]) for s in steps] == [
        ("echo", f"Called echo on {server}", False),
        ("fail", f"fail on {server} failed", True),
    ]


def test_a_stdio_step_names_the_operators_server_and_the_servers_own_tool_name(
    owner, owner_client, inline, mcp_settings, capture_events
):
    listing = _listing(owner, {"transport": "stdio", "url": "", "server": "time"})
    params = {"transport": "stdio", "server": "time", "prefix": "clock_", "tools": ticked(listing, "get_current_time")}
    workflow, _, _ = mcp_workflow(owner, params)
    steps = _send(owner_client, workflow, 'call clock_get_current_time: {"timezone": "UTC"}')
    assert _step_events(capture_events) == [
        ("clock_get_current_time", "started", "Calling get_current_time on time…"),
        ("clock_get_current_time", "finished", "Called get_current_time on time"),
    ]
    assert [s["label"] for s in steps] == ["Called get_current_time on time"]


def test_a_step_of_a_tool_without_a_label_hook_keeps_its_name(owner, owner_client, inline, capture_events):
    from tests.chat.helpers import chat_workflow

    workflow, _, _ = chat_workflow(owner, memory=True)
    steps = _send(owner_client, workflow, "remember: the launch is on Friday")
    assert steps and all(s["label"] == s["name"] for s in steps)
    assert all(e["label"] == e["name"] for e in capture_events.events("run.step"))
