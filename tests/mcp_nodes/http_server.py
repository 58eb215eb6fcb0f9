"""An HTTP MCP server for the tests, written with the SDK's server side and run as its own process:

    python tests/mcp_nodes/http_server.py PORT CALLS_LOG [TOKEN]

It speaks Streamable HTTP at /mcp, or with MCP_TEST_TRANSPORT=sse the older HTTP+SSE (the SDK's `sse_app`: an event
stream at GET /sse, messages POSTed to /messages/).

Tools that echo, fail, hang, flood, answer structured content or an image, report progress, and one (`evolve`) that
changes the server's tool list. Every call is appended to CALLS_LOG (fsynced) before it does anything, so a test
can count what reached the server. With TOKEN, a request without `Authorization: Bearer TOKEN` gets 401.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys

import uvicorn
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from starlette.responses import PlainTextResponse

PORT, CALLS_LOG = int(sys.argv[1]), sys.argv[2]
TOKEN = sys.argv[3] if len(sys.argv) > 3 else ""
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 60).decode()

server = MCPServer("opencompany-test-server")


def _logged(name: str, arguments: dict) -> None:
    with open(CALLS_LOG, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"tool": name, "arguments": arguments}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Say the text back."""
    _logged("echo", {"text": text})
    return f"echo: {text}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason given."""
    _logged("fail", {"reason": reason})
    raise ToolError(f"it failed because {reason}")


@server.tool()
async def hang(seconds: float) -> str:
    """Sleep that long before answering."""
    _logged("hang", {"seconds": seconds})
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _logged("hang-cancelled", {"seconds": seconds})  # the client's notifications/cancelled reached the server
        raise
    _logged("hang-done", {"seconds": seconds})
    return "woke up"


@server.tool()
def huge(chars: int) -> str:
    """Answer with that many characters."""
    _logged("huge", {"chars": chars})
    return "x" * chars


@server.tool()
def measure(text: str) -> dict:
    """Structured content: the text's length and words."""
    _logged("measure", {"text": text})
    return {"length": len(text), "words": len(text.split())}


@server.tool()
def picture() -> Image:
    """An image."""
    _logged("picture", {})
    return Image(data=base64.b64decode(PNG), format="png")


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Count up, reporting progress."""
    _logged("count", {"steps": steps})
    for step in range(steps):
        await ctx.report_progress(step + 1, steps)
    return f"counted to {steps}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def wipe(target: str) -> str:
    """Pretend to delete the target."""
    _logged("wipe", {"target": target})
    return f"wiped {target}"


@server.tool()
def evolve() -> str:
    """Change this server's tools: `echo` takes a second argument from now on."""
    _logged("evolve", {})
    server.remove_tool("echo")

    def echo(text: str, times: int = 1) -> str:
        """Say the text back, several times."""
        _logged("echo", {"text": text, "times": times})
        return " ".join([f"echo: {text}"] * times)

    server.add_tool(echo)
    return "evolved"


app = server.sse_app() if os.environ.get("MCP_TEST_TRANSPORT") == "sse" else server.streamable_http_app()


async def application(scope, receive, send):
    if TOKEN and scope["type"] == "http":
        headers = dict(scope.get("headers") or [])
        if headers.get(b"authorization", b"").decode() != f"Bearer {TOKEN}":
            await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
            return
    await app(scope, receive, send)


if __name__ == "__main__":
    uvicorn.run(application, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
