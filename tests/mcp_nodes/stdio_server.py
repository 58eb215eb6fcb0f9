"""A stdio MCP server for the tests, written with the SDK's server side: it reports what it was started with (its
environment's names, its resource limits, its parent), so tests can check what a stdio server is given."""

from __future__ import annotations

import os
import resource

from mcp.server.mcpserver import MCPServer

server = MCPServer("opencompany-stdio-test-server")


@server.tool()
def environment() -> dict:
    """The names of this process's environment variables."""
    return {"names": sorted(os.environ)}


@server.tool()
def limits() -> dict:
    """This process's address-space, CPU and open-files limits (soft)."""
    return {
        "address_space": resource.getrlimit(resource.RLIMIT_AS)[0],
        "cpu_seconds": resource.getrlimit(resource.RLIMIT_CPU)[0],
        "open_files": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }


if __name__ == "__main__":
    server.run("stdio")
