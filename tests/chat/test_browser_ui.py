"""The chat page at the level of the chat apps people use (issue 15), in Debian's Chromium against the real web
server, worker and broker with the offline provider: text as typed, Markdown with highlighted code and a copy
button (rendered the same while it streams), opening at the latest message, auto-scroll that pauses when the owner
scrolls up, notes never shown to the owner, tool steps as steps, dark mode and a phone width.
Screenshots land in test-artifacts/chat-ui/."""

from __future__ import annotations

import pytest

from tests.chat.helpers import chat_workflow
from tests.processes import REPO_ROOT, chromium_page

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "chat-ui"
PASSWORD = "pw-for-browser-2"
LONG = " ".join(f"word{i}" for i in range(260))
CODE_STEPS = (
    "Steps:\n\n1. Install it:\n\n   ```python\n   def greet(name):\n       return 'hi ' + name\n   ```\n2. Run it"
)
TYPED = "line one\nline <b>two</b> <script>x</script>"


@pytest.fixture
def setup(make_user, settings):
    # Before the browser starts: Playwright's sync API runs an event loop, and the ORM refuses to run inside one.
    from chat.services import chat_message_send
    from tests.realtime import session_cookie_for

    owner = make_user("ui-owner", password=PASSWORD)
    workflow, _, ids = chat_workflow(owner, memory=True)
    settings.AGENT_EXECUTION_MODE = "inline"
    for n in range(12):  # enough history that the page has to scroll
        chat_message_send(workflow=workflow, text=f"earlier message {n}\n\n" + " ".join(["filler"] * 40))
    settings.AGENT_EXECUTION_MODE = "celery"
    name, value = session_cookie_for(owner).split("=", 1)
    return owner, workflow, ids, {"name": name, "value": value}


@pytest.fixture
def browser_page(tmp_path):
    with chromium_page(tmp_path / "profile", height=800) as page:
        yield page


def shot(page, name: str, *, full_page: bool = False) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


def answers(page):
    return page.locator("#thread > li.msg.assistant:not(.streaming)")


AT_BOTTOM = (
    "(() => { const s = document.getElementById('thread-scroll');"
    " return s.scrollHeight - s.scrollTop - s.clientHeight < 4; })()"
)


def open_chat(page, stack, workflow, cookie):
    page.context.add_cookies([{**cookie, "url": stack}])
    page.goto(f"{stack}/workflows/{workflow.pk}/chat/")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")


def test_text_as_typed_markdown_code_copy_latest_and_autoscroll(setup, stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    owner, workflow, ids, cookie = setup
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=stack)
    open_chat(page, stack, workflow, cookie)
    composer = page.get_by_label("Message", exact=True)

    # Opens at the latest message, with the composer focused.
    expect(answers(page)).to_have_count(12)
    # The page scrolls to the latest after it lays the thread out: wait for that, not for a moment.
    page.wait_for_function(AT_BOTTOM, timeout=10_000)
    expect(answers(page).last).to_be_in_viewport()
    expect(composer).to_be_focused()
    shot(page, "01-opens-at-latest")

    # The owner's message exactly as typed: line breaks kept, markup shown as text.
    composer.fill(TYPED)
    composer.press("Enter")
    mine = page.locator("#thread > li.msg.user").last
    expect(mine.locator(".body")).to_have_text(TYPED, timeout=10_000)
    assert mine.locator(".body b, .body script").count() == 0
    assert mine.locator(".body").inner_text() == TYPED  # innerText keeps the line break: pre-wrap
    expect(answers(page)).to_have_count(13, timeout=20_000)
    shot(page, "02-text-as-typed")

    # A fenced code block inside a numbered step: rendered and highlighted while it streams, the same at the end.
    composer.fill(CODE_STEPS + "\n\n" + " ".join(["more"] * 60))
    composer.press("Enter")
    streaming = page.locator("li.streaming")
    expect(streaming.locator("ol li pre span.tok-k").first).to_be_visible(timeout=20_000)
    expect(streaming.locator("ol li pre")).to_contain_text("return 'hi ' + name")  # the whole block has arrived
    shot(page, "03-code-while-streaming")
    streamed_code = streaming.locator("pre").first.inner_html()
    expect(answers(page)).to_have_count(14, timeout=30_000)
    answer = answers(page).last
    block = answer.locator("ol > li .code-block")
    expect(block).to_have_count(1)
    expect(block.locator("pre span.tok-k").first).to_have_text("def")
    assert block.locator("pre").inner_html() == streamed_code  # no jump: the final rendering is the streamed one
    expect(block.locator(".code-lang")).to_have_text("python")
    expect(answer.locator("ol > li")).to_have_count(2)
    block.get_by_role("button", name="Copy this code").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == "def greet(name):\n    return 'hi ' + name\n"
    shot(page, "04-code-highlighted-and-copied")

    # Auto-scroll follows the answer, and pauses when the owner scrolls up; "Jump to latest" brings them back.
    composer.fill(LONG)
    composer.press("Enter")
    expect(page.locator("li.streaming")).to_contain_text("word6", timeout=20_000)
    page.wait_for_function(AT_BOTTOM, timeout=10_000)
    page.evaluate("document.getElementById('thread-scroll').scrollTop = 200")
    jump = page.get_by_role("button", name="Jump to latest")
    expect(jump).to_be_visible()  # the page has taken the scroll up: it stops following
    before = page.locator("li.streaming .body").inner_text()
    page.wait_for_function(
        f"document.querySelector('li.streaming .body').innerText.length > {len(before) + 60}", timeout=20_000
    )
    assert page.evaluate("document.getElementById('thread-scroll').scrollTop") == 200
    expect(jump).to_be_visible()
    shot(page, "05-scrolled-up-while-streaming")
    jump.click()
    page.wait_for_function(AT_BOTTOM, timeout=10_000)
    expect(jump).to_be_hidden()
    # A message during the answer is refused in plain words; the refusal goes when the answer ends.
    composer.fill("are you there?")
    composer.press("Enter")
    expect(page.locator("#notice")).to_contain_text("An answer is still being worked on")
    expect(answers(page)).to_have_count(15, timeout=30_000)
    # The final rendering replaces the streamed one (its height may change); the page follows it on its next frame.
    page.wait_for_function(AT_BOTTOM, timeout=10_000)
    expect(page.locator("#notice")).to_be_hidden()
    shot(page, "06-followed-to-the-end")


def test_rating_notes_stay_with_the_agent_and_tool_steps_show_as_steps(setup, stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    owner, workflow, ids, cookie = setup
    open_chat(page, stack, workflow, cookie)
    composer = page.get_by_label("Message", exact=True)

    # Rate, then write: the agent hears the rating, the owner never sees the note.
    answers(page).last.get_by_role("button", name="Good answer").click()
    good = answers(page).last.get_by_role("button", name="Good answer")
    expect(good).to_have_attribute("aria-pressed", "true")
    expect(good).to_have_text("✓ Good")
    shot(page, "07-rated")
    composer.fill("what next?")
    composer.press("Enter")
    expect(answers(page)).to_have_count(13, timeout=20_000)
    latest = answers(page).last
    expect(latest).to_contain_text("You said: what next?")
    assert "[feedback]" not in latest.inner_text() and "rating" not in latest.inner_text()
    expect(latest).to_contain_text("(1 note from OpenCompany: feedback.)")
    # The next answer carries no note at all (told once).
    composer.fill("and then?")
    composer.press("Enter")
    expect(answers(page)).to_have_count(14, timeout=20_000)
    assert "note" not in answers(page).last.locator(".body").inner_text()

    # A memory tool call is a step under the answer, not JSON in it.
    composer.fill("remember: the launch is on Friday")
    composer.press("Enter")
    expect(answers(page)).to_have_count(15, timeout=20_000)
    answer = answers(page).last
    expect(answer.locator(".body")).to_contain_text("Saved to memory as #", timeout=10_000)
    assert "{" not in answer.locator(".body").inner_text()
    steps = answer.locator("details.steps")
    expect(steps.locator("> summary")).to_contain_text("1 step")
    steps.locator("> summary").click()
    step = steps.locator("details.step")
    expect(step.locator(".step-name")).to_have_text("memory")
    expect(step.locator(".step-args")).to_contain_text("operation: remember")
    step.locator("> summary").click()
    expect(step.locator(".step-summary")).to_contain_text("the launch is on Friday")
    step.locator(".step-full > summary").click()
    expect(step.locator(".step-full pre")).to_contain_text('"content": "the launch is on Friday"')
    shot(page, "08-memory-step")
    # An update (a new message) keeps the owner's open disclosures open (the page morphs, it does not replace).
    composer.fill("thanks")
    composer.press("Enter")
    expect(answers(page)).to_have_count(16, timeout=20_000)
    expect(answers(page).nth(14).locator("details.steps")).to_have_attribute("open", "")


def test_dark_mode_and_a_phone_width(setup, stack, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    owner, workflow, ids, cookie = setup
    page.emulate_media(color_scheme="dark")
    open_chat(page, stack, workflow, cookie)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 21, 28)", background
    shot(page, "09-dark")
    # The socket drops and cannot come back for a while: the page says so, and stops saying so once it is back.
    page.evaluate(
        """() => {
        window.RealWebSocket = window.WebSocket;
        window.WebSocket = class {
          constructor() { this.readyState = 3; this.handlers = {}; setTimeout(() => this.fire("close"), 10); }
          addEventListener(type, fn) { (this.handlers[type] ||= []).push(fn); }
          fire(type) { for (const fn of this.handlers[type] || []) fn({}); }
          close() {}
        };
        window.chatSocket.close();
      }"""
    )
    expect(page.locator("#connection")).to_be_visible(timeout=5_000)
    expect(page.locator("#connection")).to_contain_text("Reconnecting")
    shot(page, "09b-reconnecting")
    page.evaluate("() => { window.WebSocket = window.RealWebSocket; }")
    expect(page.locator("#connection")).to_be_hidden(timeout=15_000)
    page.set_viewport_size({"width": 390, "height": 844})
    page.emulate_media(color_scheme="light")
    page.reload()
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    # The top bar is one line (its links sit in a menu); every chat link and Clear chat is on screen.
    for selector in (".topbar", ".brand"):
        height = page.locator(selector).evaluate("e => e.getBoundingClientRect().height")
        assert height < 60, (selector, height)
    for item in page.locator(".chat-links > *").all():
        expect(item).to_be_in_viewport(ratio=1)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    expect(page.get_by_label("Message", exact=True)).to_be_in_viewport()
    shot(page, "10-phone")
