"""Test connection: a node's MCP server lists its tools (real servers, real processes), and what may not be reached."""

from __future__ import annotations

import pytest

from mcp_nodes.client import tool_digest
from tests.mcp_nodes.helpers import mcp_node
from workflows.services import workflow_create

pytestmark = pytest.mark.django_db


def _workflow(owner, **params):
    return workflow_create(owner=owner, name="mcp", graph={"nodes": [mcp_node(**params)], "edges": []}).workflow


def _discover(client, workflow, node_id="mcp", params=None):
    body = {} if params is None else {"params": params}
    return client.post(f"/api/workflows/{workflow.pk}/mcp-servers/{node_id}/tools/", body, format="json")


def _node_id(workflow) -> str:
    return workflow.graph["nodes"][0]["id"]


def test_the_stdio_time_server_lists_its_tools(owner, owner_client, mcp_settings):
    workflow = _workflow(owner, transport="stdio", server="time")
    response = _discover(owner_client, workflow, _node_id(workflow))
    assert response.status_code == 200, response.content
    tools = {t["name"]: t for t in response.json()["tools"]}
    assert {"get_current_time", "convert_time"} <= set(tools)
    current = tools["get_current_time"]
    assert current["input_schema"]["type"] == "object" and "timezone" in current["input_schema"]["properties"]
    assert current["digest"] == tool_digest("get_current_time", current["description"], current["input_schema"])
    assert current["ticked"] is False and response.json()["server"] == "time"


def test_the_http_server_lists_tools_with_their_annotations(owner, owner_client, http_server):
    workflow = _workflow(owner, url=http_server.url)
    response = _discover(owner_client, workflow, _node_id(workflow))
    assert response.status_code == 200, response.content
    tools = {t["name"]: t for t in response.json()["tools"]}
    assert tools["echo"]["annotations"] == {"readOnlyHint": True}
    assert tools["wipe"]["annotations"] == {"destructiveHint": True}
    assert tools["echo"]["input_schema"]["required"] == ["text"]
    assert http_server.calls() == []  # listing calls no tool


def test_a_header_takes_its_value_from_the_owners_secret(owner, owner_client, token_server):
    workflow = _workflow(owner, url=token_server.url, headers=[{"name": "Authorization", "secret": "test-token"}])
    missing = _discover(owner_client, workflow, _node_id(workflow))
    assert missing.status_code == 400 and missing.json()["code"] == "mcp_missing_secret"
    assert "test-token" in missing.json()["message"]
    value = {"value": "Bearer tok-0123456789-secret-value"}
    stored = owner_client.put("/api/secrets/test-token/", value, format="json")
    assert stored.status_code == 200 and "value" not in stored.json() and stored.json()["value_suffix"] == "alue"
    response = _discover(owner_client, workflow, _node_id(workflow))
    assert response.status_code == 200, response.content
    assert "echo" in {t["name"] for t in response.json()["tools"]}
    listed = owner_client.get("/api/secrets/").json()
    assert listed == [{"name": "test-token", "value_suffix": "alue", "updated_at": listed[0]["updated_at"]}]


def test_a_wrong_token_is_a_clear_error(owner, owner_client, token_server):
    owner_client.put("/api/secrets/tok/", {"value": "Bearer wrong-wrong-wrong"}, format="json")
    workflow = _workflow(owner, url=token_server.url, headers=[{"name": "Authorization", "secret": "tok"}])
    response = _discover(owner_client, workflow, _node_id(workflow))
    assert response.status_code == 400
    assert response.json()["message"].startswith(f"MCP server {token_server.url}:")
    assert "wrong-wrong" not in response.content.decode()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:9/mcp", "a loopback address"),
        ("https://10.1.2.3/mcp", "a private address"),
        ("http://169.254.169.254/latest/meta-data", "a cloud metadata address"),
        ("https://[::1]/mcp", "a loopback address"),
    ],
)
def test_internal_addresses_are_refused_on_save_and_on_connect(owner, owner_client, settings, url, reason):
    settings.MCP_HTTP_ALLOWED_HOSTS = []
    created = owner_client.post(
        "/api/workflows/", {"name": "x", "graph": {"nodes": [mcp_node(url=url)], "edges": []}}, format="json"
    )
    assert created.status_code == 400
    (issue,) = created.json()["issues"]
    assert issue["code"] == "INVALID_PARAMS" and reason in issue["message"] and "MCP server URL" in issue["message"]
    workflow = _workflow(owner)  # saved without a URL: the panel's unsaved edit carries it
    response = _discover(owner_client, workflow, _node_id(workflow), params={"url": url})
    assert response.status_code == 400 and reason in response.json()["message"]


def test_a_stdio_server_must_be_on_the_operators_list(owner, owner_client, mcp_settings):
    workflow = _workflow(owner)
    response = _discover(owner_client, workflow, _node_id(workflow), params={"transport": "stdio", "server": "bash"})
    assert response.status_code == 400 and "'bash' is not one this installation lists" in response.json()["message"]
    bad = {"transport": "stdio", "server": "time", "command": "/bin/sh"}
    response = _discover(owner_client, workflow, _node_id(workflow), params=bad)
    assert response.status_code == 400  # no field for a command: an owner can never type one


def test_an_unreachable_server_is_a_clear_error(owner, owner_client, mcp_settings):
    from tests.processes import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    workflow = _workflow(owner, url=url)
    response = _discover(owner_client, workflow, _node_id(workflow))
    assert response.status_code == 400 and response.json()["code"] == "mcp_unreachable"
    assert url in response.json()["message"]


def test_another_owners_workflow_node_and_secrets_are_404(owner, other_client, owner_client, http_server):
    workflow = _workflow(owner, url=http_server.url)
    owner_client.put("/api/secrets/mine/", {"value": "s3cr3t-value-of-owner"}, format="json")
    assert _discover(other_client, workflow, _node_id(workflow)).status_code == 404
    assert _discover(owner_client, workflow, "no-such-node").status_code == 404
    assert other_client.get("/api/secrets/").json() == []
    assert other_client.delete("/api/secrets/mine/").status_code == 404
