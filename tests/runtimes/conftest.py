"""Fixtures of the runtime tests: the fake provider servers each CLI or SDK talks to, and (for the Chromium tests)
the real web server and worker with a runtime agent's chat. Helpers are in tests/runtimes/helpers.py."""

import contextlib

import pytest

from tests.agents.factories import edge, started_workflow
from tests.processes import running_site


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


# --- the Chromium tests: the real web server and worker, and a chat whose one agent runs on a runtime ---------


@pytest.fixture
def runtime_stack(tmp_path):
    """`runtime_stack(**env)` starts a real Celery worker with the runtime's environment (its fake provider server)
    and a web server; it returns the site's base URL. Both stop after the test."""
    with contextlib.ExitStack() as running:

        def start(**env: str) -> str:
            runtime = {"AGENT_RUNTIME_DIR": str(tmp_path / "runtimes"), "AGENT_STOP_POLL_SECONDS": "0.05"}
            return running.enter_context(running_site(tmp_path, **runtime, **env))

        yield start


@pytest.fixture
def runtime_chat(make_user):
    """`runtime_chat(lead, name=...)`: a started chat workflow (trigger, the agent node `lead`, its context) of a
    new owner, and that owner's session cookie for Chromium. Made before the browser starts: Playwright's sync API
    runs an event loop, and the ORM refuses to run inside one."""
    from tests.realtime import session_cookie_for

    def make(lead: dict, *, name: str) -> tuple:
        owner = make_user("browser-owner", password="pw-for-browser-1")
        workflow, _, _ = started_workflow(
            owner,
            [
                {"id": "trigger", "type": "chatTrigger", "params": {}},
                lead,
                {"id": "ctx", "type": "context", "params": {}},
            ],
            [
                edge("trigger", "output-main", "lead", "input-main"),
                edge("ctx", "output-context", "lead", "input-context"),
            ],
            name=name,
        )
        cookie_name, value = session_cookie_for(owner).split("=", 1)
        return workflow, {"name": cookie_name, "value": value}

    return make
