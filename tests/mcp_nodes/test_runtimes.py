"""Agent runtimes offer wired MCP tools too: a Vertex managed agent (the real google-genai SDK against the local fake
of Google's interactions endpoint) gets the MCP tool as a function declaration with the server's own schema, an RLM
agent as a function in its sandbox, Claude Code through the project-tool bridge; each call is answered by the real
MCP server from the runtime's tool thread in the worker, once."""

from __future__ import annotations

import json

import pytest

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.store import conversation_key, load_conversation
from tests.fakes.base import Call, Text, Think, Turn

from .helpers import mcp_workflow
from .test_calls import _http

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_vertex_agent_calls_an_mcp_tool_as_a_function(owner, settings, tmp_path, http_server, vertex_fake):  # noqa: F811
    settings.AGENT_EXECUTION_MODE = "inline"
    settings.AGENT_RUNTIME_DIR = str(tmp_path / "runtimes")
    params = {"project": "P", "location": "L", "agent": "antigravity-preview-05-2026", "environment": "remote"}
    workflow, generation, ids = mcp_workflow(
        owner, _http(owner, http_server, "echo"), provider="vertex_agent", model="gemini-3-flash", **params
    )
    vertex_fake.push(
        Turn([Call("echo", json.dumps({"text": "from vertex"}), id="call-1")]),
        Turn([Text("It said: echo: from vertex.")]),
    )
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="echo something")
    )
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    first, second = vertex_fake.creates()
    [tool] = first.body["tools"]
    assert tool["type"] == "function" and tool["name"] == "echo"
    assert tool["parameters"]["properties"]["text"]["type"] == "string"
    [result] = second.body["input"]
    assert result["type"] == "function_result" and result["call_id"] == "call-1"
    assert "echo: from vertex" in result["result"] and not result.get("is_error")
    assert http_server.calls("echo") == [{"tool": "echo", "arguments": {"text": "from vertex"}}]
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert stored[3]["blocks"][0]["content"] == "echo: from vertex"


def test_an_rlm_agent_calls_an_mcp_tool_from_its_repl(owner, settings, tmp_path, http_server, monkeypatch):
    """RLM's sandboxed child calls the tool as a function; the call itself is made by the worker, never the sandbox."""
    from tests.fakes import FakeChatCompletions

    settings.AGENT_EXECUTION_MODE = "inline"
    settings.AGENT_RUNTIME_DIR = str(tmp_path / "runtimes")
    with FakeChatCompletions() as backend:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", backend.base_url)
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-rlm-backend-key")
        workflow, generation, ids = mcp_workflow(
            owner,
            _http(owner, http_server, "echo"),
            provider="rlm",
            model="local-model",
            rlm_backend="openai_compatible",
        )
        backend.push(
            Turn([Text("```repl\nprint(echo(text='from the repl'))\n```")]),
            Turn([Text("```repl\nanswer['content'] = 'Echoed.'\nanswer['ready'] = True\n```")]),
        )
        firing = Firing.objects.get(
            pk=firing_start(
                workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="echo something"
            )
        )
        assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
        assert "echo(" in backend.requests[0].body["messages"][0]["content"]  # offered in the RLM's system prompt
    assert firing.final_text == "Echoed."
    assert http_server.calls("echo") == [{"tool": "echo", "arguments": {"text": "from the repl"}}]
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    result = [m["blocks"][0] for m in stored if m["role"] == "tool"][0]
    (call,) = result["observed"]["tool_calls"]
    assert call["name"] == "echo" and not call["is_error"] and "echo: from the repl" in result["content"]


def test_claude_code_calls_an_mcp_tool_through_the_project_tool_bridge(
    owner,
    settings,
    tmp_path,
    http_server,
    anthropic_fake,  # noqa: F811
):
    settings.AGENT_EXECUTION_MODE = "inline"
    settings.AGENT_RUNTIME_DIR = str(tmp_path / "runtimes")
    workflow, generation, ids = mcp_workflow(
        owner, _http(owner, http_server, "echo"), provider="claude_code", model="claude-sonnet-4-5"
    )
    anthropic_fake.push(
        Turn([Think("Echo it."), Call("mcp__project__echo", json.dumps({"text": "from claude code"}))]),
        Turn([Text("Echoed.")]),
    )
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="echo something")
    )
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    assert [t["name"] for t in anthropic_fake.requests[0].body.get("tools", [])] == ["mcp__project__echo"]
    assert http_server.calls("echo") == [{"tool": "echo", "arguments": {"text": "from claude code"}}]
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    result = stored[3]["blocks"][0]
    assert result["name"] == "mcp__project__echo" and not result["is_error"]
    assert "echo: from claude code" in json.dumps(result["content"])


def test_codex_calls_an_mcp_tool_through_the_project_tool_bridge(owner, settings, tmp_path, http_server, monkeypatch):
    """The real `codex` binary reaches the run's project tools as an MCP server by URL (the bridge, bearer-token
    guarded); its call is answered by the real MCP server from the worker, once, and shows as a step named after the
    tool and its server."""
    from tests.fakes import FakeOpenAIResponses

    settings.AGENT_EXECUTION_MODE = "inline"
    settings.AGENT_RUNTIME_DIR = str(tmp_path / "runtimes")
    with FakeOpenAIResponses() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-codex-runtime")
        workflow, generation, ids = mcp_workflow(
            owner, _http(owner, http_server, "echo"), provider="codex_cli", model="gpt-5"
        )
        fake.push(
            Turn([Call("echo", json.dumps({"text": "from codex"}), id="call-1", namespace="mcp__project")]),
            Turn([Text("Echoed.")]),
        )
        firing = Firing.objects.get(
            pk=firing_start(
                workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="echo something"
            )
        )
        requests = [r for r in fake.requests if r.path == "/v1/responses"]
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    # Offered as the bridge's namespace of MCP tools, with the server's own schema.
    (namespace,) = [t for t in requests[0].body["tools"] if t.get("type") == "namespace"]
    assert namespace["name"] == "mcp__project" and [t["name"] for t in namespace["tools"]] == ["echo"]
    assert namespace["tools"][0]["parameters"]["required"] == ["text"]
    (output,) = [i for i in requests[1].body["input"] if i.get("type") == "function_call_output"]
    assert "echo: from codex" in json.dumps(output["output"])
    assert http_server.calls("echo") == [{"tool": "echo", "arguments": {"text": "from codex"}}]
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    (call,) = [b for b in stored[2]["blocks"] if b["type"] == "tool_call"]
    result = stored[3]["blocks"][0]
    assert call["name"] == "echo" and json.loads(call["arguments_raw"]) == {"text": "from codex"}
    assert result["name"] == "echo" and not result["is_error"] and result["content"] == "echo: from codex"
    assert firing.final_text == "Echoed."
