"""A stdio MCP server for the tests, written with the SDK's server side: it reports what it was started with (its
environment's names, its resource limits, its process id), so tests can check what a stdio server is given and
which child answered; `hang` sleeps (a call to kill the child under)."""

from __future__ import annotations

import os
import resource
import time

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


@server.tool()
def pid(wait: float = 0) -> dict:
    """This process's id, after waiting `wait` seconds."""
    time.sleep(wait)
    return {"pid": os.getpid()}


@server.tool()
def hang(seconds: float, mark: str = "") -> str:
    """Sleep that long before answering (first writing `mark`, a file, when given: the call has arrived)."""
    if mark:
        with open(mark, "w") as handle:
            handle.write(str(os.getpid()))
    time.sleep(seconds)
    return "woke up"


if __name__ == "__main__":
    server.run("stdio")
