"""The chat page in Debian's Chromium (Playwright) against the real web server, worker, broker and the offline
provider: send and stream, a refusal during a run, Stop (Esc) and reload, Edit and the Context panel, ‹ › switch
back, Try again. Screenshots of each step land in test-artifacts/chat/."""

from __future__ import annotations

import pytest

from tests.chat.helpers import LONG, answers, shot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_chat_page_end_to_end(setup, stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    owner, workflow, ids, cookie = setup
    # Logged in as the owner (a session made by Django's test client, stored in the shared database).
    page.context.add_cookies([{**cookie, "url": stack}])
    page.goto(f"{stack}/workflows/{workflow.pk}/chat/")
    expect(page.get_by_label("Message", exact=True)).to_be_visible()
    expect(page.locator("#context-link")).to_have_attribute("href", f"/workflows/{workflow.pk}/context/")
    expect(page.locator(".memory-link")).to_have_attribute("href", f"/workflows/{workflow.pk}/memory/{ids['mem']}/")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    shot(page, "01-empty")

    # Send and see the streamed answer.
    page.get_by_label("Message", exact=True).fill("hello there")
    page.keyboard.press("Enter")
    expect(answers(page)).to_have_count(1, timeout=20_000)
    expect(answers(page).first).to_contain_text("I see 0 earlier messages. You said: hello there")
    shot(page, "02-answered")

    # A long answer streams with a caret; sending during it is refused in plain words; Esc stops it.
    page.get_by_label("Message", exact=True).fill(LONG)
    page.keyboard.press("Enter")
    streaming = page.locator("li.streaming")
    expect(streaming.locator(".caret")).to_be_visible(timeout=20_000)
    expect(streaming).to_contain_text("word3", timeout=20_000)
    expect(page.locator("#stop")).to_be_visible()
    shot(page, "03-streaming")
    page.get_by_label("Message", exact=True).fill("are you there?")
    page.get_by_label("Message", exact=True).press("Enter")
    expect(page.locator("#notice")).to_contain_text("An answer is still being worked on", timeout=10_000)
    shot(page, "04-refused-during-run")
    # A reload mid-run reads well: the text so far, the caret, and the stream goes on.
    page.reload()
    streaming = page.locator("li.streaming")
    expect(streaming.locator(".caret")).to_be_visible(timeout=10_000)
    expect(streaming).to_contain_text("You said: word0")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    before = len(streaming.locator(".body").inner_text())
    page.wait_for_function(
        f"document.querySelector('li.streaming .body') && "
        f"document.querySelector('li.streaming .body').innerText.length > {before + 20}",
        timeout=10_000,
    )
    shot(page, "04b-reloaded-mid-run")
    page.keyboard.press("Escape")
    expect(answers(page)).to_have_count(2, timeout=20_000)
    stopped = answers(page).nth(1)
    expect(stopped.locator(".badge.stopped")).to_have_text("Stopped")
    partial = stopped.locator(".body").inner_text()
    assert partial.startswith("I see 2 earlier messages. You said: word0") and "word299" not in partial
    page.reload()
    expect(answers(page).nth(1).locator(".badge.stopped")).to_have_text("Stopped")
    assert answers(page).nth(1).locator(".body").inner_text() == partial
    shot(page, "05-stopped-after-reload")

    # Edit the long message: the agent forgets the abandoned branch (the Context panel shows the rewound list).
    page.get_by_label("Message", exact=True).fill("")
    users = page.locator("#thread > li.msg.user")
    # Esc cancels an edit and sends nothing.
    users.nth(1).get_by_role("button", name="Edit this message").click()
    page.get_by_label("Edit your message").press("Escape")
    expect(page.get_by_label("Edit your message")).to_have_count(0)
    expect(users.nth(1).get_by_role("button", name="Edit this message")).to_be_focused()
    users.nth(1).get_by_role("button", name="Edit this message").click()
    edit_box = page.get_by_label("Edit your message")
    expect(edit_box).to_be_focused()
    expect(users.nth(1).get_by_role("button", name="Edit this message")).to_be_hidden()  # no Edit while editing
    edit_box.fill("a short question")
    edit_box.press("Enter")
    expect(answers(page).nth(1)).to_contain_text("I see 2 earlier messages. You said: a short question",
                                                 timeout=20_000)  # fmt: skip
    expect(users.nth(1).locator(".switch-label")).to_have_text("2 / 2")
    shot(page, "06-edited")
    page.goto(f"{stack}/workflows/{workflow.pk}/context/")
    context_text = page.locator("main").inner_text()
    assert "a short question" in context_text and "word10" not in context_text
    shot(page, "07-context-rewound")

    # Switch back with ‹: the old conversation comes back, for the page and for the agent.
    page.goto(f"{stack}/workflows/{workflow.pk}/chat/")
    users = page.locator("#thread > li.msg.user")
    users.nth(1).get_by_role("button", name="Previous version of your message").click()
    expect(users.nth(1).locator(".switch-label")).to_have_text("1 / 2")
    expect(answers(page).nth(1).locator(".badge.stopped")).to_have_text("Stopped")
    shot(page, "08-switched-back")
    page.goto(f"{stack}/workflows/{workflow.pk}/context/")
    context_text = page.locator("main").inner_text()
    assert "word10" in context_text and "a short question" not in context_text
    shot(page, "09-context-restored")

    # Try again on the latest answer.
    page.goto(f"{stack}/workflows/{workflow.pk}/chat/")
    page.get_by_role("button", name="Try again").click()
    latest = answers(page).nth(1)
    expect(latest.locator(".switch-label")).to_have_text("2 / 2", timeout=30_000)
    expect(latest).to_contain_text("You said: word0")
    expect(latest.locator(".badge")).to_have_count(0, timeout=30_000)
    shot(page, "10-tried-again")
    # Good/bad and copy are there for answers, with their state announced.
    latest.get_by_role("button", name="Good answer").click()
    expect(answers(page).nth(1).get_by_role("button", name="Good answer")).to_have_attribute("aria-pressed", "true")
    shot(page, "11-rated")
