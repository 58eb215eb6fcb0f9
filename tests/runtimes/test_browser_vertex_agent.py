"""A chat with a Vertex managed agent in Debian's Chromium, through the real web server and worker, the real
google-genai SDK against the fake Vertex interactions server: the answer streams, the second message continues the
first interaction, and the Context panel says what Google keeps and what we keep. Screenshots land in
test-artifacts/runtimes/."""

from __future__ import annotations

import threading

import pytest

from tests.agents.factories import agent_node
from tests.fakes import FakeVertexInteractions
from tests.fakes.base import Text, Think, Turn
from tests.runtimes.helpers import answers, shot

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOKEN = "ya29.browser-vertex-token"


@pytest.fixture
def fake():
    with FakeVertexInteractions(project="P", location="L") as server:
        server.accepted_tokens = {TOKEN}
        yield server


@pytest.fixture
def stack(runtime_stack, fake):
    return runtime_stack(VERTEX_AGENT_BASE_URL=fake.base_url, VERTEX_AGENT_CREDENTIALS=TOKEN)


@pytest.fixture
def setup(runtime_chat):
    lead = agent_node(
        "lead", "Lead", provider="vertex_agent", model="gemini-3-flash", project="P", location="L",
        agent="antigravity-preview-05-2026", environment="remote",
    )  # fmt: skip
    return runtime_chat(lead, name="vertex agent chat")


def test_a_vertex_agent_chat_streams_continues_and_the_context_panel_says_what_is_kept(
    setup,
    stack,
    fake,
    browser_page,
):
    from playwright.sync_api import expect

    page = browser_page
    workflow, cookie = setup
    page.context.add_cookies([{**cookie, "url": stack}])
    words = " ".join(f"word{i}" for i in range(60))
    release = threading.Event()
    answer = Text(f"Hello from the Vertex agent. {words}")
    fake.push(Turn([Think("A greeting."), answer], hold_after_first_text=release))
    page.goto(f"{stack}/workflows/{workflow.pk}/chat/")
    page.wait_for_function("window.chatSocket && window.chatSocket.readyState === 1")
    page.get_by_label("Message", exact=True).fill("hello there")
    page.keyboard.press("Enter")
    expect(page.locator("li.streaming")).to_contain_text("Hello from the Vertex agent.", timeout=60_000)
    shot(page, "vertex-01-streaming")
    release.set()
    expect(answers(page)).to_have_count(1, timeout=60_000)
    expect(answers(page).first).to_contain_text("word59")

    fake.push(Turn([Text("You said hello there.")]))
    page.get_by_label("Message", exact=True).fill("what did I say?")
    page.keyboard.press("Enter")
    expect(answers(page)).to_have_count(2, timeout=60_000)
    expect(answers(page).nth(1)).to_contain_text("You said hello there.")
    shot(page, "vertex-02-continued")
    first_id = next(iter(fake.interactions))
    assert fake.creates()[-1].body["previous_interaction_id"] == first_id

    page.goto(f"{stack}/workflows/{workflow.pk}/context/")
    fidelity = page.locator("#ctx-fidelity")
    expect(fidelity).to_contain_text("exact observable events plus interaction/environment binding", ignore_case=True)
    expect(fidelity).to_contain_text("Google keeps")
    second_id = list(fake.interactions)[-1]
    expect(page.locator("#ctx-binding")).to_contain_text(second_id)
    expect(page.locator("#ctx-binding")).to_contain_text(fake.interactions[second_id]["environment_id"])
    shot(page, "vertex-03-context-panel")

    # The agent's form says what the provider keeps (its fidelity, in an owner's words) and the Vertex params.
    page.goto(f"{stack}/workflows/{workflow.pk}/")
    expect(page.locator("#editor")).to_have_attribute("data-state", "ready")
    page.locator(".drawflow-node[data-type='agent']").click()
    form = page.locator("#node-form")
    expect(form).to_contain_text("Vertex agent keeps everything it shows, and Google keeps the session")
    expect(form.locator("[name='agent']")).to_have_value("antigravity-preview-05-2026")
    expect(form.locator("[name='environment']")).to_have_value("remote")
    # The environment is an advanced setting: its help (in owner words) shows once "More settings" unfolds.
    environment_help = form.get_by_text("a new sandbox for each conversation, kept by Google")
    expect(environment_help).to_be_hidden()
    form.get_by_text("More settings").click()
    expect(environment_help).to_be_visible()
    shot(page, "vertex-04-agent-form")
