"""Test connection: the tools an MCP server node's server lists, compared with the ones the node ticked (and pinned)."""

from __future__ import annotations

from django.conf import settings
from pydantic import ValidationError

from core.errors import NotFoundError, ServiceError

from .client import McpFailure, list_tools, server_label
from .node import McpServerParams, connection_of


def _node(workflow, node_id: str) -> dict:
    for node in (workflow.graph or {}).get("nodes", []):
        if isinstance(node, dict) and node.get("id") == node_id and node.get("type") == "mcpServer":
            return node
    raise NotFoundError(message="No MCP server node with that id in this workflow.")


def mcp_server_tools_discover(*, user, workflow, node_id: str, params: dict | None = None) -> dict:
    """List the server's tools. `workflow`: one `user` owns (the caller checked, `access_workflow`). `params`: the
    panel's unsaved edits of the node (else its saved params). A node that is not an MCP server node is 404."""
    node = _node(workflow, node_id)
    try:
        parsed = McpServerParams.model_validate(params if params is not None else node.get("params") or {})
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        raise ServiceError(
            "invalid_params", f"MCP server node {node_id}: {first.get('msg', 'invalid params')}"
        ) from None
    connection = connection_of(parsed)
    if parsed.transport == "stdio" and not parsed.server:
        raise ServiceError("invalid_params", f"MCP server node {node_id}: pick a stdio server first.")
    try:
        listed = list_tools(owner_id=user.pk, connection=connection)
    except McpFailure as exc:
        raise ServiceError(f"mcp_{exc.code}", f"MCP server {server_label(connection)}: {exc.message}") from None
    ticked = {tool.name: tool.digest for tool in parsed.tools}
    names = {tool.name for tool in listed}
    return {
        "server": server_label(connection),
        "tools": [
            {
                **tool.to_dict(),
                "ticked": tool.name in ticked,
                "changed": tool.name in ticked and ticked[tool.name] != tool.digest,
            }
            for tool in listed
        ],
        "missing": [name for name in ticked if name not in names],
    }


def stdio_servers_list() -> list[dict]:
    """The operator's stdio servers as an owner may see them: a name and a label, never the command or its env."""
    servers = settings.MCP_STDIO_SERVERS or {}
    return [{"name": name, "label": str((entry or {}).get("label") or name)} for name, entry in sorted(servers.items())]
