"""NUL (and an unpaired surrogate) is refused with a JSON 400 `invalid_text` wherever text enters: URL segments,
query parameters, page forms and every JSON body (graph params, memory, chat, tokens) — one check
(core.text), nothing reaches PostgreSQL, nothing is half-written."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from chat.models import ChatMessage
from memory.models import MemoryItem, MemoryNamespace
from tests.chat.helpers import chat_workflow
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

NUL = "a\u0000b"
SURROGATE = "a\ud800b"


@pytest.fixture
def started(owner):
    workflow, generation, ids = chat_workflow(owner, memory=True)
    return workflow, ids


def assert_refused(response, field_fragment: str = ""):
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == "invalid_text" and body["message"]
    assert field_fragment in body["field"]


def send_json(client, method: str, url: str, data):
    """The body as JSON with \\u escapes (how a client sends a lone surrogate; it has no UTF-8 form)."""
    return getattr(client, method)(url, data=json.dumps(data), content_type="application/json")


@pytest.fixture
def page_client(owner):
    client = Client()
    client.force_login(owner)
    return client


def test_url_segments(owner_client, page_client, started):
    workflow, _ids = started
    namespaces = MemoryNamespace.objects.count()
    assert_refused(owner_client.get(f"/api/workflows/{workflow.pk}/memory/a%00b/items/"), "URL path")
    assert_refused(page_client.get(f"/workflows/{workflow.pk}/memory/a%00b/"), "URL path")
    assert MemoryNamespace.objects.count() == namespaces


def test_query_parameters(owner_client, page_client, started):
    workflow, ids = started
    assert_refused(owner_client.get(f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/items/?q=a%00b"), "query")
    assert_refused(page_client.get(f"/workflows/{workflow.pk}/context/?node=a%00b"), "query")


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
def test_graph_params_and_names(owner_client, started, bad):
    workflow, _ids = started
    current = owner_client.get(f"/api/workflows/{workflow.pk}/").json()
    graph = current["graph"]
    lead = next(node for node in graph["nodes"] if node["type"] == "agent")
    lead["params"]["system_prompt"] = bad
    response = send_json(
        owner_client, "put", f"/api/workflows/{workflow.pk}/", {"graph": graph, "revision": current["revision"]}
    )
    assert_refused(response, "system_prompt")
    assert_refused(send_json(owner_client, "post", "/api/workflows/", {"name": bad}), "name")
    assert not Workflow.objects.filter(name__contains="b", owner=workflow.owner).exclude(pk=workflow.pk).exists()


def test_memory_items(owner_client, page_client, started):
    workflow, ids = started
    url = f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/items/"
    assert_refused(owner_client.post(url, {"content": NUL}, format="json"), "content")
    assert_refused(send_json(owner_client, "post", url, {"content": "ok", "tags": ["fine", SURROGATE]}), "tags")
    form = page_client.post(f"/workflows/{workflow.pk}/memory/{ids['mem']}/new/", {"content": NUL})
    assert_refused(form, "form")
    assert not MemoryItem.objects.exists()


def test_chat_messages(owner_client, started):
    workflow, _ids = started
    response = owner_client.post(
        f"/api/workflows/{workflow.pk}/chat/messages/", {"text": NUL, "client_message_id": "c1"}, format="json"
    )
    assert_refused(response, "text")
    assert not ChatMessage.objects.filter(session__workflow=workflow).exists()


def test_a_nul_in_a_key_is_refused_too(owner_client):
    assert_refused(owner_client.post("/api/workflows/", {"name": "ok", NUL: 1}, format="json"), "key")


def test_plain_text_with_unusual_characters_is_accepted(owner_client):
    # Only what PostgreSQL cannot store is refused: other control characters, emoji and RTL marks pass.
    name = "tab\there \u200f\U0001f600 \u0007bell"
    response = owner_client.post("/api/workflows/", {"name": name}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["name"] == name
