"""The MCP server node type (`mcpServer`): its params and the tools it offers an agent.

The owner ticks the tools the agent may use; each ticked tool is kept in the node's params with the schema the server
listed and its digest, so a generation's graph snapshot pins the list it started with (a server that changes its
tools later changes nothing in a running generation; the panel shows the difference and Start picks it up).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, model_validator

from workflows.nodes import KIND_TOOL, Handle, NodeSpec, ToolOffer

from .calls import mcp_tool_call
from .client import McpFailure, server_label
from .http import HTTP_TRANSPORTS, checked_url


class McpHeader(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=100, pattern=r"^[A-Za-z0-9-]+$", description="HTTP header name")
    secret: str = Field(..., min_length=1, max_length=64, description="The name of one of your secrets: its value")


class McpTickedTool(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=200, description="The tool's name on the server")
    description: str = Field("", max_length=10_000)
    input_schema: dict = Field(default_factory=lambda: {"type": "object", "properties": {}})
    digest: str = Field("", max_length=64, description="sha256 of the listed name, description and schema")
    annotations: dict = Field(default_factory=dict)


TRANSPORT_LABELS = {
    "http": "Streamable HTTP",
    "sse": "HTTP+SSE (older servers)",
    "auto": "HTTP: detect (Streamable HTTP, else HTTP+SSE)",
    "stdio": "stdio (a server the operator lists)",
}


class McpServerParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transport: Literal["http", "sse", "auto", "stdio"] = Field(
        "http",
        description="How to reach the server: a URL (Streamable HTTP, the older HTTP+SSE, or detect which one "
        "it speaks) or a stdio server the operator lists",
        json_schema_extra={"x-enum-labels": TRANSPORT_LABELS},
    )
    url: str = Field("", max_length=500, description="HTTP: the server's endpoint, https://…/mcp (HTTP+SSE: …/sse)")
    # Edited in the node's MCP section of the editor (a list of the operator's servers, headers, the tick list), not
    # by the generic form: `x-widget: hidden`.
    server: str = Field(
        "",
        max_length=100,
        description="stdio: one of the servers the operator lists",
        json_schema_extra={"x-widget": "hidden"},
    )
    headers: list[McpHeader] = Field(default_factory=list, max_length=20, json_schema_extra={"x-widget": "hidden"})
    tools: list[McpTickedTool] = Field(
        default_factory=list,
        max_length=200,
        description="The tools the agent may use",
        json_schema_extra={"x-widget": "hidden"},
    )
    prefix: str = Field("", max_length=32, pattern=r"^[A-Za-z0-9_-]*$", description="Put before each tool's name")
    timeout_seconds: int = Field(60, ge=1, le=3600, description="A call that takes longer is cut off")
    max_result_chars: int = Field(100_000, ge=100, le=1_000_000, description="A longer result is cut")

    @model_validator(mode="after")
    def _reachable(self):
        # Checked on every save (and again on every connect: DNS can change): the URL passes the address guard owners'
        # base URLs pass, a stdio server is one the operator lists. An empty URL is a node not set up yet.
        if self.transport in HTTP_TRANSPORTS and self.url:
            try:
                checked_url(self.url)
            except McpFailure as exc:
                raise ValueError(exc.message) from None
        if self.transport == "stdio" and self.server and self.server not in (settings.MCP_STDIO_SERVERS or {}):
            raise ValueError(f"The stdio server {self.server!r} is not one this installation lists.")
        return self


def _params(node: dict) -> McpServerParams:
    try:
        return McpServerParams.model_validate(node.get("params") or {})
    except ValueError:
        return McpServerParams()  # the validator reports the params; an invalid node offers nothing


def connection_of(params: McpServerParams) -> dict:
    """How to reach the server, as the runtime keeps it on the firing's binding: never a secret's value, only names."""
    return {
        "transport": params.transport,
        "url": params.url,
        "server": params.server,
        "headers": [h.model_dump() for h in params.headers],
        "timeout_seconds": min(params.timeout_seconds, settings.MCP_CALL_TIMEOUT_MAX_SECONDS),
        "max_result_chars": params.max_result_chars,
    }


def _mcp_tools(node: dict) -> list[ToolOffer]:
    params = _params(node)
    connection = connection_of(params)
    return [
        ToolOffer(
            name=f"{params.prefix}{tool.name}",
            description=tool.description or f"The {tool.name} tool of the MCP server {server_label(connection)}.",
            parameters=tool.input_schema or {"type": "object", "properties": {}},
            meta={"tool": tool.name, "digest": tool.digest, "server": connection},
            remote=True,
        )
        for tool in params.tools
    ]


def mcp_tool_step_label(meta: dict, state: str) -> str | None:
    """The chat's line for a call: the server's own name for the tool and the server (its stdio name, or the URL's
    host and path: never a header)."""
    tool, connection = meta.get("tool"), meta.get("server")
    if not tool or not isinstance(connection, dict):
        return None
    if connection.get("transport") == "stdio":
        server = connection.get("server") or "a stdio server"
    else:
        parts = urlsplit(connection.get("url") or "")
        server = (parts.netloc + parts.path.rstrip("/")) or "an MCP server"
    if state == "running":
        return f"Calling {tool} on {server}…"
    return f"Called {tool} on {server}" if state == "done" else f"{tool} on {server} failed"


MCP_SERVER = NodeSpec(
    type="mcpServer",
    label="MCP server",
    params_model=McpServerParams,
    outputs=(Handle("output-tool", KIND_TOOL, label="tool"),),
    tools=_mcp_tools,
    tool_call=mcp_tool_call,
    tool_step_label=mcp_tool_step_label,
    description="Tools from a Model Context Protocol server (Streamable HTTP, HTTP+SSE or an operator-listed stdio "
    "server).",
    new_params={"transport": "http", "url": "", "tools": [], "timeout_seconds": 60},
    extra={"panel": "mcp"},
)
