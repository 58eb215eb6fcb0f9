"""The `mcpServer` node's `tool_call` hook: one `tools/call`, its result as the text the model reads.

Run by the runtime outside any transaction, after the call was recorded `started` (agents/services/remote_tools.py);
everything that goes wrong becomes a tool error naming the tool and the server, which the model can act on.
"""

from __future__ import annotations

from workflows.nodes import ToolCall, ToolText

from .client import McpFailure, McpStopped, call_tool, server_label
from .results import result_text

STOPPED_TEXT = "Stopped by the owner while the call ran; it may already have had effects on the server."


def mcp_tool_call(call: ToolCall) -> ToolText:
    connection, tool = call.meta["server"], call.meta["tool"]
    try:
        result = call_tool(
            owner_id=call.owner.pk,
            connection=connection,
            tool=tool,
            arguments=call.arguments,
            should_stop=call.should_stop,
        )
    except McpStopped:
        return ToolText(STOPPED_TEXT, is_error=True)
    except McpFailure as exc:
        return ToolText(f"Error: `{tool}` on the MCP server {server_label(connection)}: {exc.message}", is_error=True)
    text, is_error = result_text(result, max_chars=int(connection["max_result_chars"]))
    return ToolText(text, is_error=is_error)
