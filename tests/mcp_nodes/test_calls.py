"""MCP tools called by an agent, end to end: the offline agent's `call <tool>: <json>` through a firing, the real
servers answering, each call stored exactly (call + result) and recorded once."""

from __future__ import annotations

import json

import pytest

from agents.models import Firing, ToolCallResult
from agents.services.firings import firing_start
from conversations.store import conversation_key, load_conversation
from mcp_nodes.client import list_tools
from tests.mcp_nodes.helpers import mcp_workflow, ticked

pytestmark = pytest.mark.django_db(transaction=True)


def _listing(owner, connection: dict) -> dict:
    tools = list_tools(owner_id=owner.pk, connection={"timeout_seconds": 30, "headers": [], **connection})
    return {"tools": [t.to_dict() for t in tools]}


def _http(owner, server, *names, **params) -> dict:
    listing = _listing(owner, {"transport": "http", "url": server.url, "server": ""})
    return {"url": server.url, "tools": ticked(listing, *names), **params}


def _run(owner, params: dict, prompt: str, **agent_params):
    workflow, generation, ids = mcp_workflow(owner, params, **agent_params)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=prompt)
    )
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    return firing, stored


def _result_blocks(stored) -> list[dict]:
    return [b for m in stored for b in m["blocks"] if b["type"] == "tool_result"]


def test_an_echo_call_is_made_once_and_stored_exactly(owner, inline, http_server):
    firing, stored = _run(owner, _http(owner, http_server, "echo", "fail"), 'call echo: {"text": "hello there"}')
    assert firing.state == Firing.State.FINISHED
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    (call,) = [b for b in stored[2]["blocks"] if b["type"] == "tool_call"]
    assert call["name"] == "echo" and call["arguments"] == {"text": "hello there"}
    (result,) = _result_blocks(stored)
    assert result == {
        "type": "tool_result",
        "tool_call_id": call["id"],
        "name": "echo",
        "content": "echo: hello there",
        "is_error": False,
    }
    assert "echo: hello there" in stored[-1]["blocks"][0]["text"]
    record = ToolCallResult.objects.get(firing=firing)
    assert record.state == "completed" and record.node_id.endswith("mcpServer:1") and record.duration_ms is not None
    assert http_server.calls() == [{"tool": "echo", "arguments": {"text": "hello there"}}]


def test_only_ticked_tools_are_offered(owner, inline, http_server):
    firing, stored = _run(owner, _http(owner, http_server, "echo"), 'call wipe: {"target": "everything"}')
    assert [b["name"] for b in firing.tool_bindings] == ["echo"]
    assert "I have no wipe tool." in stored[-1]["blocks"][0]["text"]
    assert http_server.calls() == []


def test_is_error_is_a_tool_error_the_model_reads(owner, inline, http_server):
    firing, stored = _run(owner, _http(owner, http_server, "fail"), 'call fail: {"reason": "the disk is full"}')
    (result,) = _result_blocks(stored)
    assert result["is_error"] is True and "it failed because the disk is full" in result["content"]
    assert firing.state == Firing.State.FINISHED and "The fail tool failed" in firing.final_text


def test_structured_content_and_images_become_text(owner, inline, http_server):
    prompt = 'call measure: {"text": "one two three"}\ncall picture: {}'
    firing, stored = _run(owner, _http(owner, http_server, "measure", "picture"), prompt)
    measured, picture = _result_blocks(stored)
    assert json.loads(measured["content"]) == {"length": 13, "words": 3}
    assert picture["content"].startswith("[image image/png, about") and "not shown" in picture["content"]


def test_a_huge_result_is_cut_at_the_nodes_cap(owner, inline, http_server):
    params = _http(owner, http_server, "huge", max_result_chars=1000)
    firing, stored = _run(owner, params, 'call huge: {"chars": 500000}')
    (result,) = _result_blocks(stored)
    assert result["content"].startswith("x" * 1000) and "[cut: the result had 500000 characters" in result["content"]
    assert len(result["content"]) < 1200


def test_a_hanging_tool_is_cut_off_at_the_nodes_timeout(owner, inline, http_server):
    params = _http(owner, http_server, "hang", timeout_seconds=2)
    firing, stored = _run(owner, params, 'call hang: {"seconds": 30}')
    (result,) = _result_blocks(stored)
    assert result["is_error"] and "gave no answer within 2 s" in result["content"]
    assert http_server.url in result["content"] and "`hang`" in result["content"]
    assert firing.state == Firing.State.FINISHED


def test_unreadable_arguments_never_reach_the_server(owner, inline, http_server):
    firing, stored = _run(owner, _http(owner, http_server, "echo"), "call echo: {not json")
    (result,) = _result_blocks(stored)
    assert result["is_error"] and "could not read the arguments" in result["content"]
    assert http_server.calls() == []


def test_a_server_gone_mid_firing_is_a_clear_tool_error(owner, inline, http_server):
    params = _http(owner, http_server, "echo")
    http_server.stop()
    firing, stored = _run(owner, params, 'call echo: {"text": "anyone?"}')
    (result,) = _result_blocks(stored)
    assert result["is_error"] and "could not be reached" in result["content"] and http_server.url in result["content"]
    assert firing.state == Firing.State.FINISHED


def test_the_stdio_time_server_answers_a_call(owner, inline, mcp_settings):
    listing = _listing(owner, {"transport": "stdio", "server": "time", "url": ""})
    params = {"transport": "stdio", "server": "time", "tools": ticked(listing, "get_current_time")}
    firing, stored = _run(owner, params, 'call get_current_time: {"timezone": "Europe/Paris"}')
    (result,) = _result_blocks(stored)
    assert not result["is_error"] and json.loads(result["content"])["timezone"] == "Europe/Paris"


def test_a_prefix_keeps_two_servers_apart_and_a_clash_is_a_graph_error(owner, owner_client, http_server):
    from tests.agents.factories import agent_node, edge

    tools = _http(owner, http_server, "echo")["tools"]
    graph = {
        "nodes": [
            agent_node("lead", "Lead"),
            {"id": "a", "type": "mcpServer", "params": {"url": http_server.url, "tools": tools}},
            {"id": "b", "type": "mcpServer", "params": {"url": http_server.url, "tools": tools}},
        ],
        "edges": [edge("a", "output-tool", "lead", "input-tools"), edge("b", "output-tool", "lead", "input-tools")],
    }
    clash = owner_client.post("/api/workflows/", {"name": "x", "graph": graph}, format="json")
    assert clash.status_code == 400 and [i["code"] for i in clash.json()["issues"]] == ["DUPLICATE_TOOL_NAME"]
    graph["nodes"][2]["params"]["prefix"] = "b_"
    assert owner_client.post("/api/workflows/", {"name": "x", "graph": graph}, format="json").status_code == 201
    graph["nodes"][2]["params"]["prefix"] = "b" * 30 + "_"
    graph["nodes"][2]["params"]["tools"] = [{**tools[0], "name": "e" * 40}]
    too_long = owner_client.post("/api/workflows/", {"name": "x", "graph": graph}, format="json")
    assert too_long.status_code == 400 and [i["code"] for i in too_long.json()["issues"]] == ["INVALID_TOOL_NAME"]


def test_a_flooding_server_is_cut_off_with_a_clear_error(owner, inline, http_server, settings):
    params = _http(owner, http_server, "huge")
    settings.MCP_RESPONSE_MAX_BYTES = 50_000
    firing, stored = _run(owner, params, 'call huge: {"chars": 400000}')
    (result,) = _result_blocks(stored)
    assert result["is_error"] and "more than 50000" in result["content"], result["content"]
    assert len(result["content"]) < 500 and firing.state == Firing.State.FINISHED
