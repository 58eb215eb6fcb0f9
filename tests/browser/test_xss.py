"""Markup in every field an owner controls is shown as text on every page, in a real browser.

Each payload would raise a dialog if it ran. Chromium (Debian's, through Playwright) loads every page that
shows them, served by the real web server; a single dialog fails the test.
"""

from __future__ import annotations

import mimetypes
import re

import pytest

from tests.agents.factories import agent_node, edge, started_workflow
from tests.processes import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT, start_web_server

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "xss"
PAYLOADS = {
    "workflow": "<img src=x onerror=\"alert('workflow')\">",
    "agent": "<script>alert('agent')</script>",
    "chat": "<img src=x onerror=alert('chat')> and **bold** <script>alert('chat2')</script>",
    "memory": "<svg onload=alert('memory')>",
    "title": "\"><img src=x onerror=alert('title')>",
    "tag": "<b onmouseover=alert('tag')>t</b>",
}


@pytest.fixture
def world(make_user, settings):
    from chat.services.runs import chat_message_send
    from memory.services import memory_item_remember, memory_namespace_get_or_create
    from tests.realtime import session_cookie_for

    settings.AGENT_EXECUTION_MODE = "inline"  # the chat answer is made here, before the browser starts
    owner = make_user("xss-owner")
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", PAYLOADS["agent"]),
        {"id": "ctx", "type": "context", "params": {}},
        {"id": "mem", "type": "simpleMemory", "params": {}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
        edge("mem", "output-tool", "lead", "input-tools"),
    ]
    workflow, _generation, ids = started_workflow(owner, nodes, edges, name=PAYLOADS["workflow"])
    chat_message_send(workflow=workflow, text=PAYLOADS["chat"])
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=ids["mem"])
    memory_item_remember(
        namespace=namespace,
        content=PAYLOADS["memory"],
        title=PAYLOADS["title"],
        category="",
        tags=[PAYLOADS["tag"]],
        expires_at=None,
        actor="owner",
    )
    name, value = session_cookie_for(owner).split("=", 1)
    pages = [
        "/",
        f"/workflows/{workflow.pk}/",
        f"/workflows/{workflow.pk}/chat/",
        f"/workflows/{workflow.pk}/context/",
        f"/workflows/{workflow.pk}/memory/{ids['mem']}/",
    ]
    return {"cookie": {"name": name, "value": value}, "pages": pages}


def test_no_payload_runs_on_any_page(world, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    web, base_url = start_web_server(tmp_path)
    dialogs: list[str] = []
    shown: dict[str, str] = {}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM),
                args=CHROMIUM_ARGS,
            )
            context = browser.new_context()
            context.add_cookies([{**world["cookie"], "url": base_url}])

            # daphne serves no static files: serve the repo's, so the pages' scripts (the editor's canvas) run.
            def static(route):
                path = REPO_ROOT / "static" / route.request.url.split("/static/", 1)[1].split("?")[0]
                if not path.is_file():
                    return route.fulfill(status=404, body="")
                kind = mimetypes.guess_type(str(path))[0] or "text/plain"
                return route.fulfill(status=200, body=path.read_bytes(), content_type=kind)

            context.route(re.compile(r".*/static/.*"), static)
            page = context.new_page()
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            for path in world["pages"]:
                response = page.goto(base_url + path)
                assert response.status == 200, path
                page.wait_for_load_state("networkidle")
                if page.locator("#editor").count():
                    page.wait_for_selector("#editor[data-state='ready']")
                page.mouse.move(200, 200)
                shown[path] = page.inner_text("body")
                page.screenshot(path=str(ARTIFACTS / (path.strip("/").replace("/", "_") or "home")) + ".png")
            browser.close()
    finally:
        web.stop()
    assert dialogs == [], f"markup ran as script: {dialogs}"
    home, detail, chat, context_panel, memory_panel = (shown[p] for p in world["pages"])
    assert PAYLOADS["workflow"] in home and PAYLOADS["workflow"] in detail  # shown as text, not dropped
    assert PAYLOADS["agent"] in detail  # the editor draws the agent's name on its node as text
    assert "<img src=x onerror=alert('chat')>" in chat
    assert PAYLOADS["memory"] in memory_panel and PAYLOADS["title"] in memory_panel
    assert "<img src=x onerror=alert('chat')>" in context_panel
