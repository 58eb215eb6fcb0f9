"""The project tools of a run (memory, todos, an MCP server's tools: `RuntimeRun.tools`) served to a runtime that
reaches MCP servers only by URL (Codex CLI), as a Streamable HTTP MCP server written with the SDK's server side.

It lives as long as the run: bound to a loopback port of its own, it answers only requests bearing the run's random
token (the runtime reads it from an environment variable, never from its config file). Each call is answered by the
tool's own `call` on a thread of its own (project tools touch the database), once; Claude Code gets the same tools
in process (providers/runtimes/claude_code/launch.py).
"""

from __future__ import annotations

import hmac
import itertools
import logging
import secrets
import socket
import threading

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from starlette.responses import PlainTextResponse

from . import RuntimeTool

SERVER_NAME = "project"
START_SECONDS = 10.0
logger = logging.getLogger("providers.tool_bridge")


def _server(tools: list[RuntimeTool]) -> Server:
    by_name = {t.definition.name: t for t in tools}
    counter = itertools.count(1)

    async def list_tools(_ctx, _params) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.definition.name, description=t.definition.description, input_schema=t.definition.parameters
                )
                for t in tools
            ]
        )

    async def call_tool(_ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        item = by_name.get(params.name)
        if item is None:
            text, is_error = f"No project tool is named {params.name!r}.", True
        else:
            call_id = f"{params.name}-{next(counter)}"
            text, is_error = await anyio.to_thread.run_sync(item.call, dict(params.arguments or {}), call_id)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    return Server(SERVER_NAME, on_list_tools=list_tools, on_call_tool=call_tool)


class ToolBridge:
    """`with ToolBridge(tools) as bridge:` the server runs; `bridge.url` and `bridge.token` reach it."""

    def __init__(self, tools: list[RuntimeTool]):
        self.token = secrets.token_urlsafe(32)
        app = _server(tools).streamable_http_app()
        expected = f"Bearer {self.token}".encode()

        async def guarded(scope, receive, send):
            if scope["type"] == "http":
                given = dict(scope.get("headers") or []).get(b"authorization", b"")
                if not hmac.compare_digest(given, expected):
                    await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                    return
            await app(scope, receive, send)

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/mcp"
        config = uvicorn.Config(guarded, log_level="warning", lifespan="on", access_log=False)
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._uvicorn.run, kwargs={"sockets": [self._socket]}, daemon=True, name="project-tool-bridge"
        )

    def __enter__(self) -> ToolBridge:
        self._thread.start()
        ready = threading.Event()

        def wait() -> None:
            while not self._uvicorn.started and self._thread.is_alive():
                threading.Event().wait(0.01)
            ready.set()

        threading.Thread(target=wait, daemon=True).start()
        if not ready.wait(START_SECONDS) or not self._uvicorn.started:
            self.__exit__(None, None, None)
            raise RuntimeError("the project-tool bridge did not start")
        return self

    def __exit__(self, *exc) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
