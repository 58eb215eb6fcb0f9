"""Where the published schema and the handlers disagreed (issue 20, found by schemathesis): each bound the schema
states is the one the handler keeps, both sides of it. The fuzzed version of this is
test_schemathesis.py::test_the_graph_api_accepts_exactly_what_the_schema_says."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def schema():
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document))


def _parameter(schema, path, method, name):
    return next(p for p in schema["paths"][path][method]["parameters"] if p["name"] == name)["schema"]


def _body(schema, path, method):
    ref = schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][ref.rsplit("/", 1)[1]]


def _client(world) -> Client:
    return Client(headers={"Authorization": f"Token {world.owner_token}"})


def test_memory_limit_is_published_as_the_range_the_list_accepts(schema, world):
    items = "/api/workflows/{workflow_id}/memory/{node_id}/items/"
    bounds = _parameter(schema, items, "get", "limit")
    assert (bounds["minimum"], bounds["maximum"]) == (1, settings.MEMORY_LIMIT_MAX)
    url = f"/api/workflows/{world.workflow.pk}/memory/{world.memory_node_id}/items/"
    client = _client(world)
    for refused in (0, -1, settings.MEMORY_LIMIT_MAX + 1):
        answer = client.get(url, {"limit": refused})
        assert answer.status_code == 400 and answer.json()["code"] == "invalid_arguments", (refused, answer.json())
    for accepted in (1, settings.MEMORY_LIMIT_MAX):
        assert client.get(url, {"limit": accepted}).status_code == 200
    history = _parameter(schema, "/api/workflows/{workflow_id}/memory/{node_id}/history/", "get", "limit")
    assert history["minimum"] == 1 and history["maximum"] == 500
    assert client.get(url.replace("items/", "history/"), {"limit": 0}).status_code == 400


def test_expected_version_is_published_as_required_and_positive_everywhere(schema, world):
    item = "/api/workflows/{workflow_id}/memory/{node_id}/items/{item_id}/"
    on_delete = _parameter(schema, item, "delete", "expected_version")
    assert on_delete["minimum"] == 1
    patch = _body(schema, item, "patch")
    assert "expected_version" in patch["required"]  # not spectacular's all-optional PATCH copy
    assert patch["properties"]["expected_version"]["minimum"] == 1
    url = f"/api/workflows/{world.workflow.pk}/memory/{world.memory_node_id}/items/{world.items['api_delete']}/"
    client = _client(world)
    answer = client.delete(url + "?expected_version=0")
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_arguments"
    answer = client.patch(url, {"expected_version": 0, "title": "x"}, content_type="application/json")
    assert answer.status_code == 400
    answer = client.patch(url, {"title": "x"}, content_type="application/json")
    assert answer.status_code == 400 and "expected_version" in answer.json()["errors"]
    assert client.delete(url + "?expected_version=1").status_code == 204  # the bound's other side


@pytest.mark.parametrize(
    "path",
    ["/api/workflows/{workflow_id}/chat/messages/", "/api/workflows/{workflow_id}/chat/messages/{message_id}/edit/"],
)
def test_a_chat_message_text_is_published_as_non_blank_and_refused_when_blank(schema, world, path):
    text = _body(schema, path, "post")["properties"]["text"]
    assert text["pattern"] == "\\S" and text["maxLength"] == settings.CHAT_MESSAGE_MAX_CHARS
    assert "text" in _body(schema, path, "post")["required"]
    url = path.format(workflow_id=world.workflow.pk, message_id=world.user_message_id)
    client = _client(world)
    for blank in ("", "   \n"):
        answer = client.post(url, {"text": blank}, content_type="application/json")
        assert answer.status_code == 400, answer.json()
        assert answer.json()["code"] == "invalid_request" and "text" in answer.json()["errors"]
    too_long = "x" * (settings.CHAT_MESSAGE_MAX_CHARS + 1)
    assert client.post(url, {"text": too_long}, content_type="application/json").status_code == 400
