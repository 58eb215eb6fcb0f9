#!/usr/bin/env python
"""What an MCP tool call costs inside a firing, over calling the same server directly with the SDK.

Against two real servers, each a process of its own: the SDK-written Streamable HTTP server of the tests
(`tests/mcp_nodes/http_server.py`, tool `echo`) and the published `mcp-server-time` over stdio (`get_current_time`).
For each, p50/p95 over N calls of

  * **direct**: the SDK alone doing what a firing does. HTTP: one session per call (`async with mcp.Client(...)`:
    connect, initialize or discover, `tools/call`, close). stdio: one session kept open (a firing's call goes to the
    worker's pooled child, mcp_nodes/stdio.py), `tools/call` timed inside its event loop; and, for scale, one
    session per call (the server process started and ended each time: what the pool saves);
  * **in a firing, the call**: the node's call path as the runtime makes it (`ToolCallResult.duration_ms`: secrets,
    the address check, the SDK in its own thread and event loop, the result as text);
  * **in a firing, the bookkeeping**: what persist does for a remote call on top of saving the turn: the locked
    pass that finds the call and writes nothing, and around the call the reads, the `started` record before it and
    its completion after (timed around `remote_tool_calls_run`, minus the call).

The target (docs/tools.md, issue 27) is call + bookkeeping <= 1.5 x direct + 2 ms.

Then the turn overhead of offering tools: p50/p95 of a whole turn that calls no tool, with one MCP node offering
50 tools wired versus none (the schemas are in every provider request and the firing's bindings).

Firings run in this process (AGENT_EXECUTION_MODE=inline, offline provider, no delay) against the embedded
services (or DATABASE_URL/REDIS_URL); the pooled stdio child is warmed by one firing before timing. The run removes
the rows it made and prints the 1-minute load average before and after (the machine is shared; figures mean little
without it). Usage:

    .venv/bin/python bench/mcp_calls.py [--calls 40] [--turns 40]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("DEBUG", "0")
os.environ["AGENT_EXECUTION_MODE"] = "inline"
os.environ.setdefault("MCP_HTTP_ALLOWED_HOSTS", "127.0.0.1")
if not os.environ.get("SECRET_KEY"):
    import secrets

    os.environ["SECRET_KEY"] = secrets.token_urlsafe(48)
TIME_ARGV = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
os.environ.setdefault("MCP_STDIO_SERVERS", json.dumps({"time": {"argv": TIME_ARGV}}))

import anyio  # noqa: E402
import django  # noqa: E402
from anyio.from_thread import start_blocking_portal  # noqa: E402
from figures import percentile  # noqa: E402  (bench/, the script's own folder)

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from agents.models import Firing, ToolCallResult  # noqa: E402
from agents.services import persist  # noqa: E402
from agents.services.firings import firing_start  # noqa: E402
from mcp_nodes.client import list_tools  # noqa: E402
from workflows.services import workflow_create, workflow_start  # noqa: E402


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"1-min load {one:.2f} (5-min {five:.2f}, 15-min {fifteen:.2f}; {os.cpu_count()} CPUs)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_http_server(folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "mcp_nodes" / "http_server.py"), str(port), str(folder / "calls.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the HTTP MCP server did not start")


def direct(server, tool: str, arguments: dict, calls: int) -> list[float]:
    """The SDK alone, one session per call."""

    async def one() -> float:
        started = time.perf_counter()
        async with Client(server, cache=None) as client:
            await client.call_tool(tool, arguments)
        return (time.perf_counter() - started) * 1000

    return [anyio.run(one) for _ in range(calls)]


class KeptSession:
    """The SDK alone with one session kept open on its own event loop; each `tools/call` is timed inside the loop."""

    def __init__(self, server):
        self.server = server

    def __enter__(self):
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._client_cm = self.portal.wrap_async_context_manager(Client(self.server, cache=None))
        self.client = self._client_cm.__enter__()
        return self

    def __call__(self, tool: str, arguments: dict, calls: int) -> list[float]:
        async def one() -> float:
            started = time.perf_counter()
            await self.client.call_tool(tool, arguments)
            return (time.perf_counter() - started) * 1000

        return [self.portal.call(one) for _ in range(calls)]

    def __exit__(self, *exc):
        self._client_cm.__exit__(None, None, None)
        self._portal_cm.__exit__(None, None, None)


class RemotePhase:
    """Times, in this process (inline mode), what persist does for remote calls on top of saving the turn: the locked
    pass that finds them and writes nothing, and `remote_tool_calls_run` around the calls."""

    def __init__(self):
        self.extra_passes: list[float] = []
        self.phases: list[float] = []
        self._run, self._pass = persist.remote_tool_calls_run, persist._persist_pass

    def __enter__(self):
        def timed_run(firing_id, iteration):
            started = time.perf_counter()
            try:
                return self._run(firing_id, iteration)
            finally:
                self.phases.append((time.perf_counter() - started) * 1000)

        def timed_pass(firing_id, iteration):
            started = time.perf_counter()
            pending = self._pass(firing_id, iteration)
            if pending:
                self.extra_passes.append((time.perf_counter() - started) * 1000)
            return pending

        persist.remote_tool_calls_run, persist._persist_pass = timed_run, timed_pass
        return self

    def __exit__(self, *exc):
        persist.remote_tool_calls_run, persist._persist_pass = self._run, self._pass


def workflow_with(owner, mcp_params: dict | None):
    nodes = [
        {"id": "t", "type": "chatTrigger", "params": {}},
        {
            "id": "a",
            "type": "agent",
            "params": {"name": "Bench", "provider": "offline", "model": "offline-echo", "system_prompt": "Be brief."},
        },
    ]
    edges = [{"source": "t", "sourceHandle": "output-main", "target": "a", "targetHandle": "input-main"}]
    if mcp_params is not None:
        nodes.append({"id": "m", "type": "mcpServer", "params": mcp_params})
        edges.append({"source": "m", "sourceHandle": "output-tool", "target": "a", "targetHandle": "input-tools"})
    outcome = workflow_create(owner=owner, name="mcp bench", graph={"nodes": nodes, "edges": edges})
    generation, _ = workflow_start(workflow=outcome.workflow)
    return outcome.workflow, generation.number, outcome.aliases.get("a", "a")


def measured(owner, baseline, tool: str, arguments: dict, params: dict, calls: int, *, warm: bool = False):
    """(direct, call, bookkeeping) timings, a direct call (`baseline(tool, arguments, 1)`) and a firing's call taken
    in turn, so both see the same load (on a shared machine it moves more between two runs than the overhead
    measured here). `warm`: one firing first, untimed (it starts the pooled stdio child)."""
    workflow, generation, agent = workflow_with(owner, params)
    prompt = f"call {tool}: {json.dumps(arguments)}"
    if warm:
        firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt)
    direct_ms, call_ms = [], []
    with RemotePhase() as phase:
        for _ in range(calls):
            direct_ms += baseline(tool, arguments, 1)
            firing_id = firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt)
            record = ToolCallResult.objects.get(firing_id=firing_id)
            assert record.state == "completed" and not record.is_error, record.content
            call_ms.append(float(record.duration_ms))
    bookkeeping = [
        extra + max(0.0, run - call) for extra, run, call in zip(phase.extra_passes, phase.phases, call_ms, strict=True)
    ]
    return direct_ms, call_ms, bookkeeping


def turn_times(owner, params: dict | None, turns: int) -> list[float]:
    workflow, generation, agent = workflow_with(owner, params)
    times = []
    for _ in range(turns):
        started = time.perf_counter()
        firing_id = firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt="hello")
        times.append((time.perf_counter() - started) * 1000)
        assert Firing.objects.get(pk=firing_id).state == Firing.State.FINISHED
    return times


def line(label: str, values: list[float]) -> str:
    return f"  {label:<44} p50 {percentile(values, 0.5):8.1f} ms   p95 {percentile(values, 0.95):8.1f} ms"


def report(name: str, direct_ms: list[float], call_ms: list[float], bookkeeping: list[float], *, baseline: str) -> None:
    total = [c + b for c, b in zip(call_ms, bookkeeping, strict=True)]
    p50_direct, p50_total = percentile(direct_ms, 0.5), percentile(total, 0.5)
    print(f"{name}:")
    print(line(f"direct (SDK, {baseline})", direct_ms))
    print(line("in a firing: the call", call_ms))
    print(line("in a firing: the bookkeeping", bookkeeping))
    print(line("in a firing: call + bookkeeping", total))
    verdict = "within" if p50_total <= 1.5 * p50_direct + 2 else "OVER"
    print(
        f"  p50 ratio {p50_total / p50_direct:.2f} x direct; target 1.5 x + 2 ms = {1.5 * p50_direct + 2:.1f} ms: "
        f"{verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    print(f"before: {load()}")
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"mcp-bench-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    process, url = start_http_server(folder)
    owner = None
    try:
        owner = get_user_model().objects.create_user(username=f"mcp-bench-{os.getpid()}-{int(time.time())}")
        http = {"transport": "http", "url": url, "server": "", "headers": [], "timeout_seconds": 30}
        stdio = {"transport": "stdio", "url": "", "server": "time", "headers": [], "timeout_seconds": 30}
        keep = ("name", "description", "input_schema", "digest")
        # Ticked to run: the calls are what is measured, not an owner's approval (unannotated tools ask first).
        http_tools = [
            {**{k: t.to_dict()[k] for k in keep}, "policy": "run"}
            for t in list_tools(owner_id=owner.pk, connection=http)
        ]
        time_tools = [
            {**{k: t.to_dict()[k] for k in keep}, "policy": "run"}
            for t in list_tools(owner_id=owner.pk, connection=stdio)
        ]

        echo = [t for t in http_tools if t["name"] == "echo"]
        report(
            "Streamable HTTP (echo)",
            *measured(
                owner, lambda *a: direct(url, *a), "echo", {"text": "hi"}, {"url": url, "tools": echo}, args.calls
            ),
            baseline="one session per call",
        )
        current = [t for t in time_tools if t["name"] == "get_current_time"]
        params = StdioServerParameters(command=TIME_ARGV[0], args=TIME_ARGV[1:])
        node = {"transport": "stdio", "server": "time", "tools": current}
        arguments = {"timezone": "UTC"}
        with KeptSession(params) as kept:
            report(
                "stdio (mcp-server-time; a firing's call goes to the worker's pooled child)",
                *measured(owner, kept, "get_current_time", arguments, node, args.calls, warm=True),
                baseline="one session kept open",
            )
        started_each = direct(params, "get_current_time", arguments, max(3, args.calls // 8))
        print(line("for scale: SDK, a server started per call", started_each))

        fifty = [{**echo[0], "name": f"tool_{i:02d}", "digest": ""} for i in range(50)]
        none, offered = turn_times(owner, None, args.turns), turn_times(owner, {"url": url, "tools": fifty}, args.turns)
        print("A turn that calls no tool (inline, offline provider):")
        print(line("no tools offered", none))
        print(line("50 MCP tools offered", offered))
        print(f"  p50 difference {percentile(offered, 0.5) - percentile(none, 0.5):+.1f} ms")
    finally:
        if owner is not None:
            owner.delete()
        process.terminate()
        process.wait(timeout=10)
        print(f"after: {load()}")


if __name__ == "__main__":
    main()
