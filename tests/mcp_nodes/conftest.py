"""Fixtures of the MCP node tests: real MCP servers, each a process of its own (tests/mcp_nodes/helpers.py)."""

from __future__ import annotations

import pytest

from tests.mcp_nodes.helpers import TIME_SERVER, HttpMcpServer


@pytest.fixture
def mcp_settings(settings):
    settings.MCP_STDIO_SERVERS = {"time": TIME_SERVER}
    settings.MCP_HTTP_ALLOWED_HOSTS = ["127.0.0.1"]
    return settings


@pytest.fixture
def http_server(tmp_path, mcp_settings):
    server = HttpMcpServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def token_server(tmp_path, mcp_settings):
    server = HttpMcpServer(tmp_path, token="tok-0123456789-secret-value")
    yield server
    server.stop()


@pytest.fixture
def sse_server(tmp_path, mcp_settings):
    server = HttpMcpServer(tmp_path, sse=True)
    yield server
    server.stop()


@pytest.fixture
def sse_token_server(tmp_path, mcp_settings):
    server = HttpMcpServer(tmp_path, token="tok-0123456789-secret-value", sse=True)
    yield server
    server.stop()
