"""An MCP node's secrets never leave the server's request headers (graph, export, events, logs, run history, the
conversation), a generation keeps the tool list it started with, and run history lists each call."""

from __future__ import annotations

import json
import logging

import pytest
from mcp import Client

from agents.models import Firing
from mcp_nodes.client import list_tools
from tests.chat.helpers import stored
from tests.mcp_nodes.helpers import mcp_workflow, ticked

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "tok-0123456789-secret-value"


def _listing(owner, url: str, headers=()) -> dict:
    connection = {"transport": "http", "url": url, "server": "", "headers": list(headers), "timeout_seconds": 30}
    return {"tools": [t.to_dict() for t in list_tools(owner_id=owner.pk, connection=connection)]}


def test_a_secret_reaches_the_server_and_nothing_else(
    owner, owner_client, inline, token_server, capture_events, caplog
):
    caplog.set_level(logging.DEBUG)
    owner_client.put("/api/secrets/server-token/", {"value": f"Bearer {SECRET}"}, format="json")
    headers = [{"name": "Authorization", "secret": "server-token"}]
    listing = _listing(owner, token_server.url, headers)
    params = {"url": token_server.url, "headers": headers, "tools": ticked(listing, "echo", "fail")}
    workflow, generation, ids = mcp_workflow(owner, params)
    sent = owner_client.post(
        f"/api/workflows/{workflow.pk}/chat/messages/",
        {"text": 'call echo: {"text": "hi"}\ncall fail: {"reason": "no reason"}'},
        format="json",
    )
    assert sent.status_code == 201, sent.content
    assert token_server.calls("echo") == [{"tool": "echo", "arguments": {"text": "hi"}}]  # the header was accepted
    firing = Firing.objects.get(workflow=workflow)
    assert firing.state == Firing.State.FINISHED

    export = owner_client.get(f"/api/workflows/{workflow.pk}/export/")
    runs = owner_client.get(f"/api/workflows/{workflow.pk}/runs/").content.decode()
    detail = owner_client.get(f"/api/workflows/{workflow.pk}/runs/{firing.pk}/").json()
    graph = owner_client.get(f"/api/workflows/{workflow.pk}/").content.decode()
    places = {
        "export": export.content.decode(),
        "graph": graph,
        "run list": runs,
        "run detail": json.dumps(detail),
        "events": json.dumps([e.event for e in capture_events.sent], default=str),
        "logs": caplog.text,
        "bindings": json.dumps(firing.tool_bindings),
        "secrets list": owner_client.get("/api/secrets/").content.decode(),
    }
    assert export.status_code == 200 and token_server.url in places["export"]
    for place, text in places.items():
        assert SECRET not in text, f"the secret leaked into the {place}"
    assert any(e.type == "run.step" for e in capture_events.sent)

    echo, fail = detail["tool_calls"]
    assert echo["server"] == token_server.url and echo["tool"] == "echo" and echo["state"] == "completed"
    assert json.loads(echo["arguments"]) == {"text": "hi"} and echo["result_chars"] == len("echo: hi")
    assert echo["duration_ms"] is not None and not echo["is_error"]
    assert fail["is_error"] and "it failed because no reason" in fail["error_preview"]

    # A model that repeats the secret in its arguments (it cannot know it; say it guessed): run history redacts it.
    owner_client.post(
        f"/api/workflows/{workflow.pk}/chat/messages/", {"text": f'call fail: {{"reason": "{SECRET}"}}'}, format="json"
    )
    second = Firing.objects.filter(workflow=workflow).exclude(pk=firing.pk).get()
    (repeated,) = owner_client.get(f"/api/workflows/{workflow.pk}/runs/{second.pk}/").json()["tool_calls"]
    assert SECRET not in json.dumps(repeated) and "***" in repeated["arguments"] and "***" in repeated["error_preview"]


def test_a_tool_list_change_after_start_does_not_change_the_running_generation(
    owner, owner_client, inline, http_server
):
    listing = _listing(owner, http_server.url)
    pinned = ticked(listing, "echo")
    workflow, generation, ids = mcp_workflow(owner, {"url": http_server.url, "tools": pinned})

    async def evolve():
        async with Client(http_server.url) as client:
            await client.call_tool("evolve", {})

    import anyio

    anyio.run(evolve)
    discovered = owner_client.post(f"/api/workflows/{workflow.pk}/mcp-servers/{ids['mcp']}/tools/", {}, format="json")
    echo = next(t for t in discovered.json()["tools"] if t["name"] == "echo")
    assert echo["ticked"] and echo["changed"] and "times" in echo["input_schema"]["properties"]

    sent = owner_client.post(
        f"/api/workflows/{workflow.pk}/chat/messages/", {"text": 'call echo: {"text": "still"}'}, format="json"
    )
    assert sent.status_code == 201
    firing = Firing.objects.get(workflow=workflow)
    (binding,) = firing.tool_bindings
    assert binding["parameters"] == pinned[0]["input_schema"] and "times" not in binding["parameters"]["properties"]
    assert binding["meta"]["digest"] == pinned[0]["digest"] != echo["digest"]
    messages = stored(workflow, generation, ids["lead"])
    assert [b["content"] for m in messages for b in m["blocks"] if b["type"] == "tool_result"] == ["echo: still"]
