"""The project-tool bridge (providers/runtimes/tool_bridge.py): a run's tools as a Streamable HTTP MCP server on
loopback, reached with the SDK's own client, that answers only the run's bearer token and ends with the run."""

from __future__ import annotations

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from providers.runtimes import RuntimeTool
from providers.runtimes.tool_bridge import ToolBridge
from providers.types import ToolDefinition

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def _tools(calls: list) -> list[RuntimeTool]:
    def shout(arguments: dict, call_id: str) -> tuple[str, bool]:
        calls.append((arguments, call_id))
        return arguments["text"].upper(), False

    return [RuntimeTool(ToolDefinition("shout", "Shout the text.", SCHEMA), shout)]


def _session(url: str, token: str | None):
    async def run():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
                listed = await client.list_tools()
                result = await client.call_tool("shout", {"text": "hello"})
                return listed, result

    return anyio.run(run)


def test_the_bridge_serves_the_runs_tools_to_its_token_only_and_ends_with_the_run():
    calls: list = []
    with ToolBridge(_tools(calls)) as bridge:
        listed, result = _session(bridge.url, bridge.token)
        assert [(t.name, t.input_schema) for t in listed.tools] == [("shout", SCHEMA)]
        assert result.content[0].text == "HELLO" and not result.is_error
        assert calls == [({"text": "hello"}, "shout-1")]
        for token in (None, "not-the-token"):
            with pytest.raises(BaseException):  # noqa: B017 (the SDK wraps the 401 in its task group's exceptions)
                _session(bridge.url, token)
            assert len(calls) == 1
        refused = httpx2.post(bridge.url, json={}, headers={"Authorization": "Bearer nope"})
        assert refused.status_code == 401
    with pytest.raises(httpx2.ConnectError):
        httpx2.post(bridge.url, json={}, headers={"Authorization": f"Bearer {bridge.token}"}, timeout=2)
