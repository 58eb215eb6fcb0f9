"""Fixtures and helpers of the runtime tests: the fake provider servers each CLI or SDK talks to, a firing run in
the background, and (for the Chromium tests) the real web server and worker with a runtime agent's chat."""

import os

import pytest

from tests.fakes import FakeAnthropic
from tests.race import Competitor


def fire_in_background(workflow, generation, agent, prompt) -> Competitor:
    """`firing_start` on its own thread and database connection; `.result(timeout)` is the firing's id."""
    from agents.services.firings import firing_start

    return Competitor(lambda: firing_start(workflow, generation, agent, prompt), name="firing").start()


def process_group_gone(pid: int) -> bool:
    """Whether the process group `pid` is gone: SIGKILLed at Stop, but on a loaded machine the kernel may take a
    moment to tear it down and reap it, so callers poll this."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def anthropic_fake(monkeypatch):
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-runtime")
        yield fake


@pytest.fixture(autouse=True)
def runtime_dir(settings, tmp_path):
    settings.AGENT_RUNTIME_DIR = str(tmp_path / "runtimes")
    settings.AGENT_EXECUTION_MODE = "inline"
    return tmp_path / "runtimes"


@pytest.fixture
def openai_fake(monkeypatch):
    from tests.fakes import FakeOpenAIResponses

    with FakeOpenAIResponses() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-codex-runtime")
        yield fake


VERTEX_TOKEN = "ya29.test-vertex-token"


@pytest.fixture
def vertex_fake(monkeypatch):
    from tests.fakes import FakeVertexInteractions

    with FakeVertexInteractions(project="P", location="L") as fake:
        fake.accepted_tokens = {VERTEX_TOKEN}
        monkeypatch.setenv("VERTEX_AGENT_BASE_URL", fake.base_url)
        monkeypatch.setenv("VERTEX_AGENT_CREDENTIALS", VERTEX_TOKEN)
        monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
        yield fake
