import pytest

from tests.fakes import FakeAnthropic


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
