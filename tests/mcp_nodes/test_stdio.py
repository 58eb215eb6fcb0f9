"""A stdio MCP server is the operator's command, started without the worker's environment and under limits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mcp_nodes.client import call_tool

pytestmark = pytest.mark.django_db

STDIO_SERVER = Path(__file__).with_name("stdio_server.py")


def _call(tool: str) -> dict:
    connection = {"transport": "stdio", "server": "reporter", "url": "", "headers": [], "timeout_seconds": 30}
    result = call_tool(owner_id=None, connection=connection, tool=tool, arguments={})
    assert not result.is_error, result
    return json.loads(result.content[0].text)


def test_a_stdio_server_gets_no_worker_environment_and_runs_under_limits(settings, monkeypatch):
    settings.MCP_STDIO_SERVERS = {"reporter": {"argv": [sys.executable, str(STDIO_SERVER)], "env": {"TZ": "UTC"}}}
    settings.MCP_STDIO_MEMORY_BYTES = 1536 * 1024**2
    settings.MCP_STDIO_CPU_SECONDS = 77
    settings.MCP_STDIO_OPEN_FILES = 123
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-key-must-not-leak")
    monkeypatch.setenv("DATABASE_URL", "postgres://worker:secret@db/opencompany")
    names = _call("environment")["names"]
    assert "TZ" in names and "PATH" in names
    assert not {"OPENAI_API_KEY", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DJANGO_SETTINGS_MODULE"} & set(names)
    assert _call("limits") == {"address_space": 1536 * 1024**2, "cpu_seconds": 77, "open_files": 123}
