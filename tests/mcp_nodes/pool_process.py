"""A worker-like process for the stdio pool tests: it makes one pooled call to the `reporter` stdio server (from
MCP_STDIO_SERVERS), prints the child's pid, then exits at once (`exit`) or waits to be killed (`wait`).

    python tests/mcp_nodes/pool_process.py exit|wait
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import django  # noqa: E402

django.setup()

from mcp_nodes.client import call_tool  # noqa: E402

connection = {"transport": "stdio", "server": "reporter", "url": "", "headers": [], "timeout_seconds": 30}
result = call_tool(owner_id=None, connection=connection, tool="pid", arguments={})
print("pid", json.loads(result.content[0].text)["pid"], flush=True)
if sys.argv[1] == "wait":
    while True:
        time.sleep(1)
