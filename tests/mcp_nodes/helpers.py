"""Helpers of the MCP node tests: the published `mcp-server-time` over stdio, `http_server.py` (written with the
SDK's server side) over Streamable HTTP, and a chat workflow whose agent uses an MCP server node."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.agents.factories import agent_node, edge, started_workflow
from tests.processes import ManagedProcess, free_port, wait_for_port

__all__ = ["TIME_SERVER", "HttpMcpServer", "mcp_node", "mcp_workflow", "ticked"]

HTTP_SERVER = Path(__file__).with_name("http_server.py")
TIME_SERVER = {"argv": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"], "label": "Time"}


class HttpMcpServer:
    """`http_server.py` as a process: Streamable HTTP at `url` (…/mcp), or with `sse=True` the older HTTP+SSE
    transport (`url` is its event stream, …/sse)."""

    def __init__(self, tmp_path: Path, token: str = "", *, sse: bool = False):
        self.port = free_port()
        self.calls_log = tmp_path / f"mcp-calls-{self.port}.log"
        self.calls_log.write_text("")
        args = [sys.executable, str(HTTP_SERVER), str(self.port), str(self.calls_log)] + ([token] if token else [])
        env = {"PATH": "/usr/bin:/bin", **({"MCP_TEST_TRANSPORT": "sse"} if sse else {})}
        self.process = ManagedProcess(args, env, tmp_path / f"mcp-server-{self.port}.log")
        wait_for_port(self.port, self.process, timeout=30)
        self.url = f"http://127.0.0.1:{self.port}/{'sse' if sse else 'mcp'}"

    def calls(self, tool: str | None = None) -> list[dict]:
        import json

        rows = [json.loads(line) for line in self.calls_log.read_text().splitlines() if line.strip()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def stop(self) -> None:
        self.process.stop()


def mcp_node(node_id: str = "mcp", **params) -> dict:
    return {"id": node_id, "type": "mcpServer", "params": params}


def ticked(listing: dict, *names: str) -> list[dict]:
    """The tools of a discovery answer the owner ticks, as the panel stores them in the node's params."""
    keep = ("name", "description", "input_schema", "digest", "annotations")
    return [{k: t[k] for k in keep} for t in listing["tools"] if t["name"] in names]


def mcp_workflow(owner, mcp_params: dict, *, context: bool = True, provider: str = "offline", **agent_params):
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Lead", provider=provider, **agent_params),
        mcp_node(**mcp_params),
    ]
    edges = [edge("trigger", "output-main", "lead", "input-main"), edge("mcp", "output-tool", "lead", "input-tools")]
    if context:
        nodes.append({"id": "ctx", "type": "context", "params": {}})
        edges.append(edge("ctx", "output-context", "lead", "input-context"))
    return started_workflow(owner, nodes, edges)
