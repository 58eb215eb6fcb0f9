import socket

import pytest

from tests.fakes import FakeAnthropic, FakeChatCompletions, FakeGemini, FakeOpenAIResponses

PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENAI_COMPATIBLE_API_KEY",
    "OPENAI_COMPATIBLE_BASE_URL",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "GEMINI_BASE_URL",
    "OFFLINE_PROVIDER_DELAY_MS",
    "OPENCOMPANY_OFFLINE_CALL_LOG",
)


def _loopback_only(connect):
    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise RuntimeError(f"provider tests may only open sockets to 127.0.0.1, not {address[0]!r}")
        return connect(self, address)

    guarded.loopback_guard = True
    return guarded


def pytest_configure(config):
    # The top-level conftest installs the same guard for the whole suite; this keeps provider tests safe when
    # they run on their own (e.g. with -p no:django) or if that guard ever goes away.
    if (
        not getattr(socket.socket.connect, "loopback_guard", False)
        and socket.socket.connect.__name__ != "_guarded_connect"
    ):
        socket.socket.connect = _loopback_only(socket.socket.connect)


@pytest.fixture(autouse=True)
def clean_provider_env(monkeypatch):
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def openai_fake():
    with FakeOpenAIResponses() as fake:
        yield fake


@pytest.fixture
def anthropic_fake():
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def gemini_fake():
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
def compat_fake():
    with FakeChatCompletions() as fake:
        yield fake
