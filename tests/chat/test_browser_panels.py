"""The owner's pages of a seeded workflow in plain words (issue 15), in Debian's Chromium against the real web
server: no internal node id, raw ISO time or internal label is shown on the chat, Context or Memory pages; the
Context panel charts size against the window; destructive actions share one confirmation; a Memory version
conflict keeps the owner's draft beside the current version. Screenshots land in test-artifacts/panels/."""

from __future__ import annotations

import re

import pytest

from tests.chat.helpers import chat_workflow
from tests.processes import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT, serve_repo_static, start_web_server

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "panels"
NODE_ID = re.compile(r"\b\d+:[A-Za-z]+:\d+\b")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
INTERNAL_WORDS = ("fts_only", "not_indexed", "(untitled)", "generation 0", "output headroom", "agent_node_id", "None")


@pytest.fixture
def seeded(make_user, settings):
    from chat.models import ChatMessage
    from chat.services import chat_feedback_set, chat_message_send
    from conversations.selectors import live_context_targets
    from tests.realtime import session_cookie_for

    settings.AGENT_EXECUTION_MODE = "inline"
    owner = make_user("panels-owner")
    workflow, _, ids = chat_workflow(owner, memory=True)
    chat_message_send(workflow=workflow, text="hello")
    chat_message_send(workflow=workflow, text="remember: the launch is on Friday")
    chat_message_send(workflow=workflow, text="recall: launch")
    answer = ChatMessage.objects.filter(role="assistant").order_by("id").first()
    chat_feedback_set(workflow=workflow, message_id=answer.pk, rating="good")
    chat_message_send(workflow=workflow, text="thanks\nsee you")
    from memory.models import MemoryItem

    name, value = session_cookie_for(owner).split("=", 1)
    item = MemoryItem.objects.get()
    memory = f"/workflows/{workflow.pk}/memory/{ids['mem']}/"
    pages = {
        "chat": f"/workflows/{workflow.pk}/chat/",
        "context": f"/workflows/{workflow.pk}/context/",
        "memory": memory,
        "memory-history": memory + "history/",
        "memory-item-history": memory + f"items/{item.pk}/history/",
        "usage": "/settings/usage/",
        "home": "/",
    }
    node = live_context_targets(workflow)[0].context_node_id
    return {"cookie": {"name": name, "value": value}, "pages": pages, "ids": ids, "context_node": node}


@pytest.fixture
def web(tmp_path):
    process, base_url = start_web_server(tmp_path)
    yield base_url
    process.stop()


@pytest.fixture
def context(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        # The pages run under the enforced policy in tests/browser/test_csp.py; here Playwright may evaluate.
        context = browser.new_context(viewport={"width": 1100, "height": 900}, bypass_csp=True)
        context.route(re.compile(r".*/static/(css|js|vendor|favicon).*"), serve_repo_static)
        yield context
        browser.close()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_owner_pages_show_no_internal_ids_times_or_labels(seeded, web, context):
    from playwright.sync_api import expect

    context.add_cookies([{**seeded["cookie"], "url": web}])
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    for name, path in seeded["pages"].items():
        response = page.goto(web + path)
        assert response.status == 200, (name, response.status)
        page.wait_for_load_state("networkidle")
        if name == "chat":
            expect(page.locator("#thread > li.msg.assistant")).to_have_count(4)
            # Open every step so their arguments and short results are scanned too.
            for summary in page.locator("details.steps > summary").all():
                summary.click()
            for summary in page.locator("details.step > summary").all():
                summary.click()
        text = page.locator("body").inner_text()
        assert not NODE_ID.findall(text), (name, NODE_ID.findall(text))
        assert not ISO_TIME.findall(text), (name, ISO_TIME.findall(text))
        for word in INTERNAL_WORDS:
            assert word not in text, (name, word)
        shot(page, f"scan-{name}")
    # The Context panel explains its gauge and charts the conversation against the window.
    page.goto(web + seeded["pages"]["context"])
    expect(page.locator("#ctx-pressure-words")).to_contain_text("of the model's")
    expect(page.locator("#chart-size .uplot")).to_have_count(1)
    expect(page.locator("#chart-days .uplot")).to_have_count(1)
    expect(page.get_by_role("link", name="← Back to the chat")).to_have_attribute("href", seeded["pages"]["chat"])
    assert not errors, errors


def test_one_confirmation_for_destructive_actions(seeded, web, context):
    from playwright.sync_api import expect

    context.add_cookies([{**seeded["cookie"], "url": web}])
    page = context.new_page()
    page.goto(web + seeded["pages"]["memory"])
    items = page.locator(".memory-item")
    expect(items).to_have_count(1)
    items.first.get_by_role("button", name="Forget…").click()
    dialog = page.get_by_role("dialog", name="Forget this memory?")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    shot(page, "confirm-forget")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    expect(items).to_have_count(1)  # nothing happened
    page.get_by_role("button", name="Clear memory…").click()
    expect(page.get_by_role("dialog", name="Clear all of this memory?")).to_be_visible()
    page.keyboard.press("Escape")
    page.goto(web + seeded["pages"]["context"])
    page.get_by_role("button", name="Clear context…").click()
    dialog = page.get_by_role("dialog", name="Clear this agent's context?")
    expect(dialog).to_be_visible()
    shot(page, "confirm-clear-context")
    dialog.get_by_role("button", name="Clear context").click()
    expect(page.locator(".flash")).to_contain_text("Context cleared.")
    # The chat marks where it happened.
    page.goto(web + seeded["pages"]["chat"])
    expect(page.locator("#thread > li.marker")).to_contain_text("Context cleared")
    shot(page, "chat-context-cleared-marker")
    page.get_by_role("button", name="Clear chat").click()
    expect(page.get_by_role("dialog", name="Clear the whole chat?")).to_be_visible()
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#thread > li.msg")).to_have_count(8)


def test_a_memory_version_conflict_keeps_the_draft(seeded, web, context):
    from playwright.sync_api import expect

    context.add_cookies([{**seeded["cookie"], "url": web}])
    mine, other = context.new_page(), context.new_page()
    for page in (mine, other):
        page.goto(web + seeded["pages"]["memory"])
        page.locator(".memory-item details > summary", has_text="Edit").click()
    draft = "The launch moved to Monday, tell the team.\nSecond line of my draft."
    mine.locator(".memory-item textarea[name=content]").fill(draft)
    # Meanwhile another tab saves a change.
    other.locator(".memory-item textarea[name=content]").fill("the launch is on Friday at noon")
    other.get_by_role("button", name="Save changes").click()
    expect(other.locator(".flash")).to_contain_text("Memory updated.")
    mine.get_by_role("button", name="Save changes").click()
    conflict = mine.locator("#memory-conflict")
    expect(conflict).to_contain_text("This memory changed while you were editing it")
    expect(conflict.locator("#conflict-current")).to_have_text("the launch is on Friday at noon")
    assert conflict.locator("textarea[name=content]").input_value() == draft
    shot(mine, "memory-conflict-keeps-draft")
    conflict.get_by_role("button", name="Save my draft over it").click()
    expect(mine.locator(".flash")).to_contain_text("Memory updated.")
    expect(mine.locator(".memory-item").first).to_contain_text("Second line of my draft.")
