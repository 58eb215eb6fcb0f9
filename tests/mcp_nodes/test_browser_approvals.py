"""Approval cards in Debian's Chromium (Playwright) against the real web server, Celery worker and broker, and the
SDK-written MCP test server: the agent calls `wipe` (destructive: it asks first by default), the card shows the
agent, the tool, its server and the arguments (a long value folded), Approve, the answer finishes with the tool's
result; a second turn, Deny with a reason, and the answer says the owner declined and why. Screenshots at 1280 and
390 px land in test-artifacts/mcp/."""

from __future__ import annotations

import pytest

from tests.chat.helpers import answers
from tests.mcp_nodes.helpers import mcp_workflow, ticked
from tests.processes import REPO_ROOT, chromium_page, running_site

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "mcp"
MCP_ENV = {"MCP_HTTP_ALLOWED_HOSTS": "127.0.0.1"}
LONG_NOTE = "keep the audit trail " * 20


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture
def setup(make_user, http_server):
    """(workflow, session cookie), made before the browser starts (the ORM refuses to run in Playwright's loop)."""
    from mcp_nodes.client import list_tools
    from tests.realtime import session_cookie_for

    owner = make_user("approvals-owner", password="pw-for-approvals-1")
    connection = {"transport": "http", "url": http_server.url, "server": "", "headers": [], "timeout_seconds": 30}
    listing = {"tools": [t.to_dict() for t in list_tools(owner_id=owner.pk, connection=connection)]}
    # Ticked as the panel does, each with the default its annotations suggest: `wipe` is destructive (ask first).
    params = {"url": http_server.url, "tools": ticked(listing, "echo", "wipe", policy=None)}
    workflow, _, _ = mcp_workflow(owner, params)
    name, value = session_cookie_for(owner).split("=", 1)
    return workflow, {"name": name, "value": value}


def test_approve_then_deny_a_tool_call_in_the_chat(setup, tmp_path, http_server):
    from playwright.sync_api import expect

    workflow, cookie = setup
    with (
        running_site(tmp_path, web_env=MCP_ENV, OFFLINE_PROVIDER_DELAY_MS="20", **MCP_ENV) as site,
        chromium_page(tmp_path / "profile", width=1280, height=900) as page,
    ):
        page.context.add_cookies([{**cookie, "url": site}])
        page.goto(f"{site}/workflows/{workflow.pk}/chat/")
        page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
        composer = page.get_by_label("Message", exact=True)

        # The agent calls `wipe`: a card under the answer in progress; nothing reached the server.
        composer.fill('call wipe: {"target": "the old logs"}')
        page.keyboard.press("Enter")
        card = page.locator("li.streaming .approval-card")
        expect(card).to_be_visible(timeout=30_000)
        expect(card.locator(".approval-title")).to_contain_text("Lead wants to run wipe on " + http_server.url)
        expect(card.locator(".approval-args").first).to_contain_text('"target": "the old logs"')
        waiting = "A tool call is waiting for your decision above: approve or deny it, or press Stop."
        expect(composer).to_have_attribute("placeholder", waiting)
        assert http_server.calls("wipe") == []
        shot(page, "approval-01-card-1280")

        # A message while the card waits is refused in plain words.
        composer.fill("hello?")
        page.keyboard.press("Enter")
        expect(page.locator("#notice")).to_contain_text("waiting for your decision on a tool call")

        # Approve: the call is made once and the answer finishes with its result.
        card.get_by_role("button", name="Approve").click()
        expect(answers(page)).to_have_count(1, timeout=30_000)
        expect(answers(page).first).to_contain_text("wiped the old logs")
        expect(answers(page).first.locator(".approval-history")).to_contain_text("wipe — Approved by approvals-owner")
        assert http_server.calls("wipe") == [{"tool": "wipe", "arguments": {"target": "the old logs"}}]
        shot(page, "approval-02-approved-1280")

        # A second turn: a long value is folded on the card; Deny with a reason, which the agent's answer mentions.
        page.locator("#notice").evaluate("n => { n.hidden = true; }")
        composer.fill('call wipe: {"target": "the backups", "note": "' + LONG_NOTE.strip() + '"}')
        page.keyboard.press("Enter")
        card = page.locator("li.streaming .approval-card")
        expect(card).to_be_visible(timeout=30_000)
        expect(card.locator(".approval-args").first).to_contain_text("more characters)")
        page.set_viewport_size({"width": 390, "height": 844})
        card.get_by_label("Reason (optional, the agent reads it)").fill("Backups stay until Friday.")
        card.scroll_into_view_if_needed()
        shot(page, "approval-03-card-390")
        card.get_by_role("button", name="Deny").click()
        expect(answers(page)).to_have_count(2, timeout=30_000)
        second = answers(page).nth(1)
        expect(second).to_contain_text("the owner declined this call. Their reason: Backups stay until Friday.")
        expect(second.locator(".approval-history")).to_contain_text("Declined by approvals-owner")
        shot(page, "approval-04-denied-390")
        page.set_viewport_size({"width": 1280, "height": 900})
        shot(page, "approval-05-denied-1280")
    assert [c["arguments"]["target"] for c in http_server.calls("wipe")] == ["the old logs"]


def test_a_test_run_in_the_editor_asks_before_a_call_too(setup, tmp_path, http_server):
    """The editor's Test run (generation 0) parks like a chat answer: the panel shows the waiting call with Approve
    and Deny, and the answer comes once decided."""
    from playwright.sync_api import expect

    workflow, cookie = setup
    with (
        running_site(tmp_path, web_env=MCP_ENV, OFFLINE_PROVIDER_DELAY_MS="20", **MCP_ENV) as site,
        chromium_page(tmp_path / "profile", width=1280, height=900) as page,
    ):
        page.context.add_cookies([{**cookie, "url": site}])
        page.goto(f"{site}/workflows/{workflow.pk}/")
        expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
        page.locator("#test-prompt").fill('call wipe: {"target": "the test logs"}')
        page.get_by_role("button", name="Test run").click()
        card = page.locator("#test-answer .test-approval")
        expect(card).to_contain_text("Lead wants to run wipe on " + http_server.url, timeout=30_000)
        expect(card.locator("pre")).to_contain_text('"target": "the test logs"')
        assert http_server.calls("wipe") == []
        card.locator("#test-answer input, input").first.fill("Only the test logs.")
        shot(page, "approval-06-test-run-1280")
        card.get_by_role("button", name="Approve").click()
        expect(page.locator("#test-answer")).to_contain_text("wiped the test logs", timeout=30_000)
    assert http_server.calls("wipe") == [{"tool": "wipe", "arguments": {"target": "the test logs"}}]
