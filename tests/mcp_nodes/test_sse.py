"""The older HTTP+SSE transport, against a real server written with the SDK's server side (`sse_app`, its own
process): picked by the owner, or detected (Streamable HTTP first, HTTP+SSE on a 4xx), with the same URL guard,
secrets as headers, size cap and timeout as Streamable HTTP."""

from __future__ import annotations

import pytest

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.store import conversation_key, load_conversation
from mcp_nodes.client import McpFailure, call_tool, list_tools
from tests.mcp_nodes.helpers import mcp_node, mcp_workflow, ticked
from workflows.services import workflow_create

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "tok-0123456789-secret-value"


def _connection(url: str, transport: str, **more) -> dict:
    return {"transport": transport, "url": url, "server": "", "headers": [], "timeout_seconds": 30, **more}


def _names(owner, url: str, transport: str, **more) -> set[str]:
    return {t.name for t in list_tools(owner_id=owner.pk, connection=_connection(url, transport, **more))}


def _discover(client, workflow, params: dict):
    node_id = workflow.graph["nodes"][0]["id"]
    return client.post(f"/api/workflows/{workflow.pk}/mcp-servers/{node_id}/tools/", {"params": params}, format="json")


def _run(owner, params: dict, prompt: str):
    workflow, generation, ids = mcp_workflow(owner, params)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=prompt)
    )
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    return firing, [b for m in stored for b in m["blocks"] if b["type"] == "tool_result"]


def _sse_params(owner, server, *names, transport: str = "sse", **params) -> dict:
    listing = {"tools": [t.to_dict() for t in list_tools(owner_id=owner.pk, connection=_connection(server.url, "sse"))]}
    return {"transport": transport, "url": server.url, "tools": ticked(listing, *names), **params}


def test_an_sse_server_lists_its_tools_and_answers_a_firings_call(owner, owner_client, inline, sse_server):
    workflow = workflow_create(
        owner=owner, name="sse", graph={"nodes": [mcp_node(transport="sse", url=sse_server.url)], "edges": []}
    ).workflow
    listed = _discover(owner_client, workflow, {"transport": "sse", "url": sse_server.url})
    assert listed.status_code == 200, listed.content
    tools = {t["name"]: t for t in listed.json()["tools"]}
    assert tools["echo"]["annotations"] == {"readOnlyHint": True} and "wipe" in tools
    assert listed.json()["server"] == sse_server.url

    firing, results = _run(owner, _sse_params(owner, sse_server, "echo", "fail"), 'call echo: {"text": "over sse"}')
    assert firing.state == Firing.State.FINISHED
    assert results == [
        {
            "type": "tool_result",
            "tool_call_id": results[0]["tool_call_id"],
            "name": "echo",
            "content": "echo: over sse",
            "is_error": False,
        }
    ]
    assert sse_server.calls() == [{"tool": "echo", "arguments": {"text": "over sse"}}]


def test_streamable_http_alone_does_not_reach_an_sse_server_and_detect_falls_back(owner, sse_server, http_server):
    with pytest.raises(McpFailure):
        _names(owner, sse_server.url, "http")  # an old server has no POST at its URL: 405, no fallback asked for
    assert "echo" in _names(owner, sse_server.url, "auto")  # detect: POST answered 405, the same URL as SSE
    assert "echo" in _names(owner, http_server.url, "auto")  # a Streamable HTTP server is used as it is
    with pytest.raises(McpFailure):
        _names(owner, http_server.url, "sse")  # GET /mcp without a session: not an event stream with an endpoint


def test_detect_makes_a_call_over_sse(owner, inline, sse_server):
    firing, results = _run(owner, _sse_params(owner, sse_server, "echo", transport="auto"), 'call echo: {"text": "x"}')
    assert [r["content"] for r in results] == ["echo: x"] and firing.state == Firing.State.FINISHED
    assert sse_server.calls() == [{"tool": "echo", "arguments": {"text": "x"}}]


def test_a_secret_header_reaches_the_sse_server_and_a_refused_one_is_not_taken_for_an_old_server(
    owner, owner_client, sse_token_server
):
    headers = [{"name": "Authorization", "secret": "sse-token"}]
    with pytest.raises(McpFailure) as missing:
        _names(owner, sse_token_server.url, "sse", headers=headers)
    assert missing.value.code == "missing_secret"
    owner_client.put("/api/secrets/sse-token/", {"value": "Bearer wrong-wrong-wrong"}, format="json")
    for transport in ("sse", "auto"):  # detect: a 401 is refused credentials, not "no Streamable HTTP here"
        with pytest.raises(McpFailure) as refused:
            _names(owner, sse_token_server.url, transport, headers=headers)
        assert "wrong-wrong" not in refused.value.message
    owner_client.put("/api/secrets/sse-token/", {"value": f"Bearer {SECRET}"}, format="json")
    assert "echo" in _names(owner, sse_token_server.url, "sse", headers=headers)
    assert "echo" in _names(owner, sse_token_server.url, "auto", headers=headers)
    result = call_tool(
        owner_id=owner.pk,
        connection=_connection(sse_token_server.url, "sse", headers=headers),
        tool="echo",
        arguments={"text": "with a token"},
    )
    assert result.content[0].text == "echo: with a token"


@pytest.mark.parametrize("transport", ["sse", "auto"])
def test_internal_addresses_are_refused_for_sse_on_save_and_on_connect(owner, owner_client, settings, transport):
    settings.MCP_HTTP_ALLOWED_HOSTS = []
    url = "http://127.0.0.1:9/sse"
    graph = {"nodes": [mcp_node(transport=transport, url=url)], "edges": []}
    created = owner_client.post("/api/workflows/", {"name": "x", "graph": graph}, format="json")
    assert created.status_code == 400
    (issue,) = created.json()["issues"]
    assert "a loopback address" in issue["message"] and "MCP server URL" in issue["message"]
    with pytest.raises(McpFailure) as refused:
        _names(owner, url, transport)
    assert refused.value.code == "unsafe_url" and "a loopback address" in refused.value.message


def test_a_flooding_sse_server_is_cut_off_and_a_hanging_one_times_out(owner, inline, sse_server, settings):
    params = _sse_params(owner, sse_server, "huge", "hang", timeout_seconds=2)
    settings.MCP_RESPONSE_MAX_BYTES = 50_000
    firing, (flood,) = _run(owner, params, 'call huge: {"chars": 400000}')
    assert flood["is_error"] and "more than 50000" in flood["content"], flood["content"]
    assert len(flood["content"]) < 500 and firing.state == Firing.State.FINISHED
    settings.MCP_RESPONSE_MAX_BYTES = 4 * 1024 * 1024
    firing, (hung,) = _run(owner, params, 'call hang: {"seconds": 30}')
    assert hung["is_error"] and "gave no answer within 2 s" in hung["content"] and sse_server.url in hung["content"]
    assert sse_server.calls("hang") == [{"tool": "hang", "arguments": {"seconds": 30}}]
