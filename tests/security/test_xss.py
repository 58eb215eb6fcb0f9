"""HTML in every user-controlled field is shown escaped on every page that shows it (test client; the chat
helper's browser tests cover the page scripts)."""

from __future__ import annotations

import pytest

from chat.services.runs import chat_message_send
from memory.services import memory_item_remember, memory_namespace_get_or_create
from tests.agents.factories import agent_node, edge, started_workflow

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
PAYLOADS = (SCRIPT, IMG)
# How the payload looks once escaped: HTML-escaped text, or JSON inside <script type="application/json">.
ESCAPED = {
    SCRIPT: ("&lt;script&gt;alert(1)&lt;/script&gt;", "\\u003Cscript\\u003Ealert(1)\\u003C/script\\u003E"),
    IMG: ("&lt;img src=x onerror=alert(1)&gt;", "\\u003Cimg src=x onerror=alert(1)\\u003E"),
}


@pytest.fixture
def hostile(owner, settings):
    """A workflow whose every owner-typed field holds markup: names, memory fields and a chat message."""
    settings.AGENT_EXECUTION_MODE = "inline"
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", f"Lead {IMG}"),
        {"id": "ctx", "type": "context", "params": {}},
        {"id": "mem", "type": "simpleMemory", "params": {"reset_policy": "keep"}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
        edge("mem", "output-tool", "lead", "input-tools"),
    ]
    workflow, _, ids = started_workflow(owner, nodes, edges, name=f"Flow {SCRIPT}")
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=ids["mem"])
    memory_item_remember(
        namespace=namespace, content=f"fact {SCRIPT} {IMG}", title=f"title {IMG}", tags=[SCRIPT[:40]], actor="owner"
    )
    chat_message_send(workflow=workflow, text=f"hello {SCRIPT} and {IMG}")
    return workflow, ids


def assert_only_escaped(content: str, payloads, page: str) -> None:
    for payload in payloads:
        assert payload not in content, f"{page} renders {payload!r} unescaped"
        assert any(form in content for form in ESCAPED[payload]), f"{page} does not show {payload!r} at all"


def test_every_page_shows_markup_escaped(owner, client, hostile):
    workflow, ids = hostile
    client.force_login(owner)
    pages = {
        "home": ("/", (SCRIPT,)),
        # The editor draws node names with its script (tests/browser/test_xss.py checks them in Chromium).
        "workflow page": (f"/workflows/{workflow.pk}/", (SCRIPT,)),
        "run history": (f"/workflows/{workflow.pk}/runs/", PAYLOADS),
        "Context panel": (f"/workflows/{workflow.pk}/context/", PAYLOADS),
        "Memory panel": (f"/workflows/{workflow.pk}/memory/{ids['mem']}/", PAYLOADS),
        "chat page": (f"/workflows/{workflow.pk}/chat/", PAYLOADS),
    }
    for page, (url, payloads) in pages.items():
        response = client.get(url)
        assert response.status_code == 200, (page, response.status_code)
        assert_only_escaped(response.content.decode(), payloads, page)
