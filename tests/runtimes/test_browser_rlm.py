"""A chat with an RLM agent in Debian's Chromium, through the real web server and Celery worker (which starts the
sandboxed child), the backend the fake Chat Completions server: each REPL cell shows as a step, the answer is the
RLM's. Screenshots land in test-artifacts/runtimes/."""

from __future__ import annotations

import pytest

from tests.agents.factories import agent_node, edge, started_workflow
from tests.chat.test_browser import answers, browser_page  # noqa: F401 - the Chromium page fixture
from tests.fakes import FakeChatCompletions
from tests.fakes.base import Text, Turn
from tests.processes import REPO_ROOT, start_celery_worker, start_web_server

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "runtimes"
PASSWORD = "pw-for-browser-1"


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture
def fake():
    with FakeChatCompletions() as server:
        yield server


@pytest.fixture
def stack(tmp_path, fake):
    env = {
        "OPENAI_COMPATIBLE_BASE_URL": fake.base_url,
        "OPENAI_COMPATIBLE_API_KEY": "sk-rlm-browser-test",
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
            agent_node("lead", "Lead", provider="rlm", model="local-model", rlm_backend="openai_compatible"),
            {"id": "ctx", "type": "context", "params": {}},
        ],
        [edge("trigger", "output-main", "lead", "input-main"), edge("ctx", "output-context", "lead", "input-context")],
        name="rlm chat",
    )
    name, value = session_cookie_for(owner).split("=", 1)
    return workflow, {"name": name, "value": value}


def test_an_rlm_chat_shows_each_cell_as_a_step_and_the_answer(setup, stack, fake, browser_page):  # noqa: F811
    from playwright.sync_api import expect

    page = browser_page
    workflow, cookie = setup
    page.context.add_cookies([{**cookie, "url": stack}])
    fake.push(
        Turn([Text("I will count the words.\n```repl\nwords = context.split()\nprint(len(words))\n```")]),
        Turn([Text("```repl\nimport os\nprint(os.listdir('/'))\n```")]),
        Turn(
            [Text("```repl\nanswer['content'] = f'The context has {len(words)} words.'\nanswer['ready'] = True\n```")]
        ),
    )
    page.goto(f"{stack}/workflows/{workflow.pk}/chat/")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    page.get_by_label("Message", exact=True).fill("count the words please")
    page.keyboard.press("Enter")
    expect(answers(page)).to_have_count(1, timeout=60_000)
    answer = answers(page).first
    expect(answer).to_contain_text("The context has 4 words.", timeout=60_000)
    steps = answer.locator("details.steps")
    expect(steps.locator("> summary")).to_contain_text("3 steps")
    if not steps.get_attribute("open"):
        steps.locator("> summary").click()
    items = steps.locator("details.step")
    expect(items).to_have_count(3)
    expect(items.locator(".step-name")).to_have_text(["repl", "repl", "repl"])
    expect(items.nth(0).locator(".step-args")).to_contain_text("words = context.split()")
    refused = items.nth(1)
    expect(refused.locator(".step-state")).to_have_attribute("aria-label", "failed")
    refused.locator("> summary").click()
    refused.locator(".step-full > summary").click()
    expect(refused.locator(".step-full pre")).to_contain_text("os.listdir outside the working directory")
    shot(page, "rlm-01-steps")
    assert all(r.headers.get("authorization") == "Bearer sk-rlm-browser-test" for r in fake.requests)
