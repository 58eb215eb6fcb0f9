"""A chat with an RLM agent in Debian's Chromium, through the real web server and Celery worker (which starts the
sandboxed child), the backend the fake Chat Completions server: each REPL cell shows as a step, the answer is the
RLM's. Screenshots land in test-artifacts/runtimes/."""

from __future__ import annotations

import pytest

from tests.agents.factories import agent_node
from tests.fakes import FakeChatCompletions
from tests.fakes.base import Text, Turn
from tests.runtimes.helpers import answers, shot

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake():
    with FakeChatCompletions() as server:
        yield server


@pytest.fixture
def stack(runtime_stack, fake):
    return runtime_stack(OPENAI_COMPATIBLE_BASE_URL=fake.base_url, OPENAI_COMPATIBLE_API_KEY="sk-rlm-browser-test")


@pytest.fixture
def setup(runtime_chat):
    return runtime_chat(
        agent_node("lead", "Lead", provider="rlm", model="local-model", rlm_backend="openai_compatible"),
        name="rlm chat",
    )


def test_an_rlm_chat_shows_each_cell_as_a_step_and_the_answer(setup, stack, fake, browser_page):
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
