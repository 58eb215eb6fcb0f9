"""A chat with a Claude Code agent in Debian's Chromium, through the real web server and worker, the real bundled
CLI against the fake Anthropic server: the answer streams, Esc stops it, the stopped answer stays. Screenshots land
in test-artifacts/runtimes/."""

from __future__ import annotations

import pytest

from tests.agents.factories import agent_node
from tests.fakes import FakeAnthropic
from tests.fakes.base import Text, Think, Turn
from tests.runtimes.helpers import answers, shot

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def stack(runtime_stack, fake):
    return runtime_stack(ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_API_KEY="sk-ant-browser-test")


@pytest.fixture
def setup(runtime_chat):
    return runtime_chat(
        agent_node("lead", "Lead", provider="claude_code", model="claude-sonnet-4-5"),
        name="claude code chat",
    )


def test_a_claude_code_chat_streams_and_stops_like_the_native_providers(setup, stack, fake, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    workflow, cookie = setup
    page.context.add_cookies([{**cookie, "url": stack}])
    fake.push(Turn([Think("A greeting."), Text("Hello from Claude Code, running as Lead.")], chunk_delay_s=0.05))
    page.goto(f"{stack}/workflows/{workflow.pk}/chat/")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    page.get_by_label("Message", exact=True).fill("hello there")
    page.keyboard.press("Enter")
    expect(answers(page)).to_have_count(1, timeout=60_000)
    expect(answers(page).first).to_contain_text("Hello from Claude Code, running as Lead.")
    shot(page, "01-answered")

    words = " ".join(f"word{i}" for i in range(200))
    fake.push(Turn([Text(words)], pause_after_first_text_s=60))
    page.get_by_label("Message", exact=True).fill("a long story please")
    page.keyboard.press("Enter")
    streaming = page.locator("li.streaming")
    expect(streaming).to_contain_text("word1", timeout=60_000)
    expect(page.locator("#stop")).to_be_visible()
    shot(page, "02-streaming")
    page.keyboard.press("Escape")
    try:
        expect(answers(page)).to_have_count(2, timeout=30_000)
    finally:
        shot(page, "02b-after-stop")
    stopped = answers(page).nth(1)
    expect(stopped.locator(".badge.stopped")).to_have_text("Stopped")
    partial = stopped.locator(".body").inner_text()
    assert partial.startswith("word0") and "word199" not in partial
    page.reload()
    expect(answers(page).nth(1).locator(".badge.stopped")).to_have_text("Stopped")
    shot(page, "03-stopped-after-reload")
