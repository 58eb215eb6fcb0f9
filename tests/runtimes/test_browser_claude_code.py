"""A chat with a Claude Code agent in Debian's Chromium, through the real web server and worker, the real bundled
CLI against the fake Anthropic server: the answer streams, Esc stops it, the stopped answer stays. Screenshots land
in test-artifacts/runtimes/."""

from __future__ import annotations

import pytest

from tests.agents.factories import agent_node, edge, started_workflow
from tests.chat.test_browser import answers, browser_page  # noqa: F401 - the Chromium page fixture
from tests.fakes import FakeAnthropic
from tests.fakes.base import Text, Think, Turn
from tests.processes import REPO_ROOT, start_celery_worker, start_web_server

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "runtimes"
PASSWORD = "pw-for-browser-1"


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def stack(tmp_path, fake):
    env = {
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "sk-ant-browser-test",
        "AGENT_RUNTIME_DIR": str(tmp_path / "runtimes"),
        "AGENT_STOP_POLL_SECONDS": "0.05",
    }
    worker = start_celery_worker(tmp_path, **env)
    web, base_url = start_web_server(tmp_path)
    yield base_url
    web.stop()
    worker.stop()


@pytest.fixture
def setup(make_user):
    from tests.realtime import session_cookie_for

    owner = make_user("browser-owner", password=PASSWORD)
    workflow, _, ids = started_workflow(
        owner,
        [
            {"id": "trigger", "type": "chatTrigger", "params": {}},
            agent_node("lead", "Lead", provider="claude_code", model="claude-sonnet-4-5"),
            {"id": "ctx", "type": "context", "params": {}},
        ],
        [edge("trigger", "output-main", "lead", "input-main"), edge("ctx", "output-context", "lead", "input-context")],
        name="claude code chat",
    )
    name, value = session_cookie_for(owner).split("=", 1)
    return workflow, {"name": name, "value": value}


def test_a_claude_code_chat_streams_and_stops_like_the_native_providers(setup, stack, fake, browser_page):  # noqa: F811
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
