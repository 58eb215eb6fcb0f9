"""Provenance in Debian's Chromium against the real web server, worker, broker and the offline provider: the
"Saved 1 memory" marker and its Undo, the forgotten item's history in the Memory panel, forgetting what an edited
message's earlier version saved, "What this answer was sent" with the recalled memory and the token counts, the
next turn's cost on the Context panel, and an item's versions side by side with Restore. Screenshots of each step
land in test-artifacts/provenance/."""

from __future__ import annotations

import re

import pytest

from tests.chat.helpers import answers
from tests.processes import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "provenance"


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def send(page, text: str, answers_before: int) -> None:
    from playwright.sync_api import expect

    page.get_by_label("Message", exact=True).fill(text)
    page.keyboard.press("Enter")
    expect(answers(page)).to_have_count(answers_before + 1, timeout=30_000)
    expect(page.locator("li.streaming")).to_have_count(0, timeout=30_000)


def test_provenance_in_the_chat_and_the_memory_panel(setup, stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    owner, workflow, ids, cookie = setup
    # What this test adds runs under the strict Content-Security-Policy: no inline script or style on the chat or
    # the history pages. (The Memory panel's own page is another change's business: its violations are not counted.)
    panel_path = f"/workflows/{workflow.pk}/memory/{ids['mem']}/"
    violations = []

    def on_console(message):
        if "Content Security Policy" in message.text:
            violations.append((page.url.split(stack, 1)[-1], message.text))

    page.on("console", on_console)
    page.context.add_cookies([{**cookie, "url": stack}])
    chat_url = f"{stack}/workflows/{workflow.pk}/chat/"
    page.goto(chat_url)
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")

    # 1. The agent saves a memory: the answer says so, and the marker opens the item with where it came from.
    send(page, "remember: my cat is Tom", 0)
    first = answers(page).nth(0)
    marker = first.locator(".mem-saved")
    expect(marker.locator("summary")).to_have_text(re.compile(r"Saved 1 memory$"), timeout=10_000)
    shot(page, "01-saved-marker")
    marker.locator("summary").click()
    expect(marker).to_contain_text("my cat is Tom")
    expect(marker).to_contain_text("saved by Lead while answering “remember: my cat is Tom”")
    expect(marker.get_by_role("link", name="See in the Memory panel")).to_be_visible()
    shot(page, "02-saved-marker-open")

    # 2. Undo: the marker says what was undone; the item is gone from the panel, its trace in the history.
    marker.get_by_role("button", name="Undo what this answer saved to memory").click()
    expect(marker.locator("summary")).to_have_text(re.compile(r"Saved 1 memory · undone$"), timeout=10_000)
    expect(marker).to_contain_text("You undid this answer's memory: forgot 1 memory it saved.")
    expect(marker.get_by_role("button", name="Undo what this answer saved to memory")).to_have_count(0)
    shot(page, "03-undone")
    marker.get_by_role("link", name="See in the Memory panel").click()
    expect(page).to_have_url(re.compile(r"/memory/.+/history/\?chat_run=\d+$"))
    expect(page.locator("#filter-note")).to_contain_text("What one answer in the chat saved")
    expect(page.locator(".history-row")).to_have_count(1)
    expect(page.locator(".history-row")).to_contain_text("Forgotten by you: Undo of what an answer saved")
    shot(page, "04-history-of-the-undone-answer")
    page.goto(f"{stack}/workflows/{workflow.pk}/memory/{ids['mem']}/")
    expect(page.locator(".memory-item")).to_have_count(0)
    expect(page.locator("main")).to_contain_text("No memories yet")
    shot(page, "05-panel-item-gone")
    page.get_by_role("link", name=re.compile("every change and where it came from")).click()
    expect(page.locator(".history-row").first).to_contain_text("Forgotten by you")
    shot(page, "06-panel-history")

    # 3. Edit a message whose answer saved a memory: the chat says what the earlier version saved; Forget is one
    # action and takes exactly that memory.
    page.goto(chat_url)
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    send(page, "remember: my dog is Rex", 1)
    users = page.locator("#thread > li.msg.user")
    users.nth(1).get_by_role("button", name="Edit this message").click()
    edit_box = page.get_by_label("Edit your message")
    edit_box.fill("remember: my cat is Tom")
    edit_box.press("Enter")
    expect(answers(page).nth(1)).to_contain_text("my cat is Tom", timeout=30_000)
    expect(page.locator("li.streaming")).to_have_count(0, timeout=30_000)
    left = users.nth(1).locator(".mem-left-note")
    expect(left).to_contain_text(
        "The answer to your earlier version of this message saved 1 memory the agent still remembers: “my dog is Rex”",
        timeout=10_000,
    )
    shot(page, "07-left-branch-saved")
    left.get_by_role("button", name="Forget what the earlier version saved").click()
    expect(users.nth(1).locator(".mem-left-note")).to_have_text(
        "You forgot the 1 memory the answer to your earlier version of this message saved.", timeout=10_000
    )
    shot(page, "08-left-branch-forgotten")

    # 4. Recall: "What this answer was sent" shows the recalled memory with its score, and the tokens.
    send(page, "recall: cat", 2)
    third = answers(page).nth(2)
    third.locator(".sent > summary").click()
    body = third.locator(".sent-body")
    expect(body).to_be_visible(timeout=10_000)
    expect(body.locator(".sent-recalled")).to_contain_text("my cat is Tom")
    expect(body.locator(".sent-recalled")).to_contain_text(re.compile(r"match \d\.\d\d"))
    expect(body.locator(".sent-tokens")).to_have_text(re.compile(r"^[1-9][\d,]* in$"))
    # The attached files the request carried (name, type, size; never the bytes): this conversation has none.
    expect(body.locator(".sent-row", has_text="Files")).to_have_text("FilesNone.")
    expect(body).to_contain_text(re.compile(r"\d+ out"))
    expect(body).to_contain_text("An estimate: tokens are counted at 4 bytes each")
    expect(body).to_contain_text("Since the previous answer")
    third.scroll_into_view_if_needed()
    shot(page, "09-what-this-answer-was-sent")
    # At phone width the facts stack and nothing runs off the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    third.locator(".sent-body").scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "09b-sent-phone")
    page.set_viewport_size({"width": 1100, "height": 900})
    # It stays open while the thread re-renders (a new snapshot after the socket's next event).
    page.evaluate("window.chatSocket.close()")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1", timeout=15_000)
    expect(third.locator(".sent-body")).to_be_visible()

    # 5. The Context panel: the next turn's expected cost beside the gauge.
    page.goto(f"{stack}/workflows/{workflow.pk}/context/")
    expect(page.locator("#ctx-next-turn")).to_contain_text("Next message: nothing (the offline model is free)")
    expect(page.locator("#ctx-next-turn")).to_contain_text("tokens again")
    shot(page, "10-context-next-turn")

    # 6. Change the memory in the panel, see both versions side by side, restore the first.
    page.goto(f"{stack}/workflows/{workflow.pk}/memory/{ids['mem']}/")
    item = page.locator(".memory-item").filter(has_text="my cat is Tom")
    expect(item).to_contain_text("Saved by Lead while answering “remember: my cat is Tom”")
    shot(page, "10b-panel-provenance")
    item.locator("summary", has_text="Edit").click()
    item.get_by_label("Content").fill("my cat is Tim, a grey one")
    item.get_by_role("button", name="Save changes").click()
    item = page.locator(".memory-item").filter(has_text="my cat is Tim")
    item.get_by_role("link", name=re.compile(r"^History")).click()
    expect(page.locator(".version")).to_have_count(2)
    newest = page.locator(".version").first
    expect(newest.locator("del")).to_have_text("Tom")
    expect(newest.locator("ins")).to_have_text("Tim, a grey one")
    expect(newest).to_contain_text("Changed by you in the Memory panel")
    expect(page.locator(".version").nth(1)).to_contain_text("Saved by Lead while answering “remember: my cat is Tom”")
    shot(page, "11-item-versions")
    page.locator(".version").nth(1).get_by_role("button", name="Restore this version").click()
    expect(page.locator(".flash")).to_contain_text("Version 1 restored: it is now version 3.")
    expect(page.locator(".version").first).to_contain_text("Changed by you: version 1 restored")
    expect(page.locator(".version").first.locator("ins")).to_have_text("Tom")
    shot(page, "12-restored")

    # 7. "The answer in the chat" lands on the answer that saved it, marked, in view.
    page.locator(".version").last.get_by_role("link", name="the answer in the chat").click()
    expect(page).to_have_url(re.compile(r"/chat/#run-\d+$"))
    linked = page.locator("li.msg:has(> .linked-here)")
    expect(linked).to_have_count(1, timeout=10_000)
    expect(linked).to_contain_text(re.compile(r"Saved to memory as #\d+ \(version 1\): my cat is Tom"))
    expect(linked).to_be_in_viewport()
    shot(page, "13-linked-answer")
    assert not [v for v in violations if v[0].split("?")[0] != panel_path], violations
