"""Talking to an MCP server through the official SDK's client (`mcp.Client`): list its tools, call one.

The worker is synchronous; each operation runs the SDK in an event loop on another thread, while the calling thread
(which owns the database connection) waits and polls Stop. A stdio server's session comes from the worker's pool
(mcp_nodes/stdio.py: one child per concurrent call, kept between calls until idle); an HTTP session (mcp_nodes/http.py)
is opened and closed (DELETE) around its operation, on a short-lived thread.

Every connect checks again what saving checked: the stdio server is on the operator's list, the URL passes the
address guard (DNS may have changed since), the secrets the headers name exist.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from django.conf import settings
from mcp import Client
from mcp.client.stdio import stdio_client

from provider_keys.secrets import SecretUnavailable, owner_secret_values

from .errors import McpFailure, McpStopped
from .http import HTTP_TRANSPORTS, checked_url, http_session
from .stdio import stdio_parameters, stdio_pool

__all__ = ["McpFailure", "McpStopped", "checked_url", "call_tool", "list_tools", "server_label"]

STOP_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str
    input_schema: dict
    annotations: dict
    digest: str

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
            "digest": self.digest,
        }


def tool_digest(name: str, description: str, input_schema: dict) -> str:
    """What a generation pins of a tool: a change of any of these is a changed tool."""
    text = json.dumps([name, description, input_schema], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def server_label(connection: dict) -> str:
    """How the owner and the model are told which server: the stdio server's name, or the URL (never a header)."""
    return connection["server"] if connection["transport"] == "stdio" else connection["url"]


def header_values(owner_id, connection: dict) -> dict[str, str]:
    headers = connection.get("headers") or []
    try:
        values = owner_secret_values(owner_id=owner_id, names=[h["secret"] for h in headers])
    except SecretUnavailable as exc:
        raise McpFailure("missing_secret", str(exc)) from None
    return {h["name"]: values[h["secret"]] for h in headers}


def _session(owner_id, connection: dict, timeout: float):
    """A session for one operation: an async context manager yielding an initialized `mcp.Client`. What needs the
    database (the secrets of the headers) is read here, on the calling thread; the session opens in the loop."""
    if connection["transport"] == "stdio":
        devnull = open(os.devnull, "w")  # noqa: SIM115 (closed with the session)

        @asynccontextmanager
        async def unpooled():
            with devnull:
                transport = stdio_client(stdio_parameters(connection["server"]), errlog=devnull)
                async with Client(transport, read_timeout_seconds=timeout, cache=None) as client:
                    yield client

        return unpooled()
    if connection["transport"] not in HTTP_TRANSPORTS:
        raise McpFailure("invalid_transport", f"Unknown MCP transport {connection['transport']!r}.")
    return http_session(
        kind=connection["transport"],
        url=checked_url(connection["url"]),
        headers=header_values(owner_id, connection),
        timeout=timeout,
    )


def _operate(owner_id, connection: dict, operation, *, timeout: float, should_stop=None, pooled: bool = True):
    """`operation(client, cancelled)` on a session of the connection's server: a pooled stdio child
    (mcp_nodes/stdio.py) when `pooled`, else a session opened and closed around it. Failures come out as
    McpFailure/McpStopped."""
    if pooled and connection["transport"] == "stdio" and settings.MCP_STDIO_IDLE_SECONDS > 0:
        try:
            return stdio_pool.run(connection["server"], operation, timeout=timeout, should_stop=should_stop)
        except BaseException as exc:  # noqa: BLE001 (mapped to what the caller is told)
            raise _plain(exc, timeout) from None
    session = _session(owner_id, connection, timeout)

    async def work(cancelled: threading.Event):
        with anyio.fail_after(timeout):
            async with session as client:
                return await operation(client, cancelled)

    return _in_thread(work, timeout=timeout, should_stop=should_stop)


def _in_thread(work, *, timeout: float, should_stop=None):
    """Run `work(cancelled: threading.Event)` (a coroutine function) in an event loop on its own thread; meanwhile
    this thread polls `should_stop` (it owns the database connection). Stop sets the event; the coroutine cancels
    its scope, and the SDK sends `notifications/cancelled` for the abandoned request."""
    cancelled = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = anyio.run(work, cancelled)
        except BaseException as exc:  # noqa: BLE001 (handed back to the calling thread)
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name="mcp-call")
    thread.start()
    while thread.is_alive():
        thread.join(STOP_POLL_SECONDS)
        if thread.is_alive() and should_stop is not None and not cancelled.is_set() and should_stop():
            cancelled.set()
    if "error" in box:
        raise _plain(box["error"], timeout)
    return box["result"]


def _plain(exc: BaseException, timeout: float) -> Exception:
    """The failure as an McpFailure / McpStopped, unwrapping the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) >= 1:
        inner = [e for e in exc.exceptions if isinstance(e, McpFailure | McpStopped)]
        exc = inner[0] if inner else exc.exceptions[0]
    if isinstance(exc, McpFailure | McpStopped):
        return exc
    if isinstance(exc, TimeoutError):
        return McpFailure("timeout", f"The MCP server gave no answer within {timeout:g} s; the call was cut off.")
    if isinstance(exc, OSError):
        return McpFailure("unreachable", f"The MCP server could not be reached ({type(exc).__name__}).")
    if isinstance(exc, httpx2.HTTPError):
        return McpFailure("unreachable", f"The MCP server could not be reached ({type(exc).__name__}).")
    message = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return McpFailure("server_error", f"The MCP server failed: {message}")


async def _watch(cancelled: threading.Event, scope: anyio.CancelScope, stopped: dict) -> None:
    while not cancelled.is_set():
        await anyio.sleep(0.05)
    stopped["yes"] = True
    scope.cancel()


def list_tools(*, owner_id, connection: dict) -> list[ListedTool]:
    """The server's tools (all pages, at most MCP_MAX_TOOLS), as discovery shows them to the owner."""
    timeout = float(connection.get("timeout_seconds") or settings.MCP_CALL_TIMEOUT_SECONDS)

    async def listing(client: Client, _cancelled: threading.Event) -> list[ListedTool]:
        listed: list[ListedTool] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                description = tool.description or ""
                schema = tool.input_schema or {"type": "object", "properties": {}}
                annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
                digest = tool_digest(tool.name, description, schema)
                listed.append(ListedTool(tool.name, description, schema, annotations, digest))
            cursor = page.next_cursor
            if not cursor or len(listed) >= settings.MCP_MAX_TOOLS:
                return listed[: settings.MCP_MAX_TOOLS]

    # Test connection runs in a web process: its stdio child ends with the listing (workers pool theirs, for calls).
    return _operate(owner_id, connection, listing, timeout=timeout, pooled=False)


def call_tool(*, owner_id, connection: dict, tool: str, arguments: dict, should_stop=None):
    """One `tools/call`; returns the SDK's CallToolResult. McpFailure when the server cannot be reached or fails at
    the protocol level, McpStopped when the owner pressed Stop meanwhile."""
    timeout = float(connection.get("timeout_seconds") or settings.MCP_CALL_TIMEOUT_SECONDS)

    async def calling(client: Client, cancelled: threading.Event):
        stopped: dict = {}
        result = None
        async with anyio.create_task_group() as group:
            group.start_soon(_watch, cancelled, group.cancel_scope, stopped)
            result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
            group.cancel_scope.cancel()
        if stopped:
            raise McpStopped()
        return result

    return _operate(owner_id, connection, calling, timeout=timeout, should_stop=should_stop)
