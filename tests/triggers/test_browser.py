"""Triggers in Debian's Chromium against the real web server and Celery worker: add a schedule trigger and a
webhook trigger on the canvas, wire them to the answering agent, save, make the hook's address (shown once, with
Copy), Start, post a signed delivery from the test, and see the turn in the chat thread marked "Webhook: Tickets"
and in the run history, named after its trigger, and filter the history by trigger. Screenshots at 1280 and 390 px
land in test-artifacts/triggers/."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from urllib.parse import quote

import pytest

from tests.browser.helpers import NODE, api, drag_from_palette, wire
from tests.chat.helpers import chat_workflow
from tests.processes import REPO_ROOT, chromium_page, running_site

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "triggers"
SECRET = "whsec-browser-test"


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture
def stack(tmp_path):
    with running_site(tmp_path, OFFLINE_PROVIDER_DELAY_MS="20") as base_url:
        yield base_url


@pytest.fixture
def setup(make_user):
    """(workflow id, session cookie), made before the browser starts (the ORM refuses to run in its event loop)."""
    from provider_keys.secrets import owner_secret_set
    from tests.realtime import session_cookie_for

    owner = make_user("trigger-owner", password="pw-for-triggers-1")
    owner_secret_set(owner=owner, name="tickets-hook", value=SECRET)
    workflow, _, _ = chat_workflow(owner, start=False)
    name, value = session_cookie_for(owner).split("=", 1)
    return workflow.pk, {"name": name, "value": value}


def post_signed(url: str, payload: dict) -> dict:
    from triggers.webhooks import sign

    body = json.dumps(payload).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-OpenCompany-Signature": sign(SECRET, body, stamp=int(time.time())),
            "Idempotency-Key": "ticket-42",
        },
    )
    with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310 (the test's own server)
        assert response.status == 202
        return json.loads(response.read())


@pytest.mark.parametrize("width", [1280, 390])
def test_add_both_triggers_start_and_a_signed_delivery_shows_in_the_chat(setup, stack, tmp_path, width):
    from playwright.sync_api import expect

    workflow_id, cookie = setup
    with chromium_page(tmp_path / "profile", width=width, height=900) as page:
        page.context.add_cookies([{**cookie, "url": stack}])
        page.goto(f"{stack}/workflows/{workflow_id}/")
        expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
        agent = f"{NODE}[data-type='agent']"
        if width < 600:
            # The phone layout: the canvas is narrow, so the nodes go where there is room.
            drag_from_palette(page, "scheduleTrigger", 20, 260)
            drag_from_palette(page, "webhookTrigger", 20, 420)
        else:
            drag_from_palette(page, "scheduleTrigger", 40, 260)
            drag_from_palette(page, "webhookTrigger", 40, 440)
        schedule, hook = f"{NODE}[data-type='scheduleTrigger']", f"{NODE}[data-type='webhookTrigger']"
        expect(page.locator(schedule)).to_have_count(1)
        wire(page, schedule, "output-main", agent, "input-main")
        wire(page, hook, "output-main", agent, "input-main")
        expect(page.locator("#canvas svg.connection")).to_have_count(4)

        # The webhook's form: its name, the mapped message and the signing secret's name.
        page.locator(hook).click(position={"x": 60, "y": 12})
        page.locator("#param-name").fill("Tickets")
        page.locator("#param-message").fill("New ticket: {body.title}")
        page.locator("#param-signing_secret").fill("tickets-hook")
        expect(page.get_by_text("Save to make its address.")).to_be_visible()
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator("#save-state")).to_contain_text("Saved")
        expect(page.locator("#issues")).to_contain_text("No problems found.")

        page.locator(hook).click(position={"x": 60, "y": 12})
        expect(page.locator("#webhook-hint")).to_contain_text("No address yet.")
        page.locator("#webhook-regenerate").click()
        address = page.locator("#webhook-url")
        expect(address).to_be_visible()
        url = address.input_value()
        assert re.fullmatch(re.escape(stack) + r"/hooks/[A-Za-z0-9_-]{43}/", url), url
        expect(page.locator("#webhook-copy")).to_be_visible()
        shot(page, f"{width}-01-webhook-address")

        page.get_by_role("button", name="Start").click()
        expect(page.locator("#run-state")).to_contain_text("Running: generation 1")
        shot(page, f"{width}-02-started")

        page.get_by_role("link", name="Open chat").click()
        page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
        delivered = post_signed(url, {"title": "Printer on fire"})
        assert delivered["state"] == "fired" and not delivered["replayed"]
        again = post_signed(url, {"title": "Printer on fire"})
        assert again == {**delivered, "replayed": True}

        # The open page hears the turn arrive: the message marked with its trigger, then the agent's answer.
        marked = page.locator("#thread > li.msg.user.triggered")
        expect(marked).to_have_count(1, timeout=30_000)
        expect(marked).to_contain_text("Webhook: Tickets")
        expect(marked).to_contain_text("New ticket: Printer on fire")
        answer = page.locator("#thread > li.msg.assistant:not(.streaming)")
        expect(answer).to_have_count(1, timeout=30_000)
        expect(answer.first).to_contain_text("You said: New ticket: Printer on fire")
        shot(page, f"{width}-03-chat-thread")

        # And the owner's own message after it, so the history has a run of each.
        page.get_by_label("Message", exact=True).fill("and one from me")
        page.keyboard.press("Enter")
        expect(answer).to_have_count(2, timeout=30_000)
        expect(answer.last).to_contain_text("You said: and one from me")

        state = api(page, "GET", f"/api/workflows/{workflow_id}/runs/")["body"]
        assert [(r["kind"], (r["trigger"] or {}).get("label")) for r in state] == [
            ("chat", None),
            ("chat", "Webhook: Tickets"),
        ], state
        hook_id = state[1]["trigger"]["node_id"]
        only_hook = api(page, "GET", f"/api/workflows/{workflow_id}/runs/?trigger={quote(hook_id, safe='')}")["body"]
        assert [r["prompt_preview"] for r in only_hook] == ["New ticket: Printer on fire"], only_hook

        # The run history names the trigger of the turn it started, beside the owner's own.
        page.goto(f"{stack}/workflows/{workflow_id}/runs/")
        rows = page.locator("tr.run-row")
        expect(rows).to_have_count(2)
        row = rows.filter(has_text="Webhook: Tickets (gen 1)")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("finished (answered)")
        expect(rows.filter(has_text="Chat (gen 1)")).to_have_count(1)
        select = page.get_by_label("Started by")
        options = select.locator("option")
        expect(options).to_have_text(["Everything", "Chat", "Scheduled: Schedule", "Webhook: Tickets"])
        shot(page, f"{width}-04-run-history")

        # Filtered by the webhook: its run only, and the select says so.
        select.select_option(label="Webhook: Tickets")
        page.get_by_role("button", name="Filter").click()
        expect(page).to_have_url(re.compile(r"\?trigger=" + re.escape(quote(hook_id, safe="")) + "$"))
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("Webhook: Tickets (gen 1)")
        expect(select).to_have_value(hook_id)
        shot(page, f"{width}-05-run-history-filtered")

        # Filtered by Chat: the owner's own message only.
        select.select_option(label="Chat")
        page.get_by_role("button", name="Filter").click()
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("Chat (gen 1)")

        # The webhook's run: its detail shows what the agent was sent.
        select.select_option(label="Webhook: Tickets")
        page.get_by_role("button", name="Filter").click()
        rows.first.get_by_role("link").first.click()
        expect(page.locator("body")).to_contain_text("New ticket: Printer on fire")
        expect(page.locator("body")).to_contain_text("Started by Webhook: Tickets")
        shot(page, f"{width}-06-run-detail")
