import itertools
import json
import sys

import pytest

from tests.flush import install_fast_flush
from tests.network_guard import guard_the_network


def pytest_configure(config):
    guard_the_network()
    install_fast_flush()


@pytest.fixture(autouse=True)
def _end_sockets_left_open():
    yield
    realtime = sys.modules.get("tests.realtime")
    if realtime is not None:
        realtime.SocketClient.end_all()


_user_numbers = itertools.count(1)


@pytest.fixture
def make_user(db, django_user_model):
    def make(username: str | None = None, *, password: str = "pw-for-tests-1", **fields):
        name = username or f"owner{next(_user_numbers)}"
        return django_user_model.objects.create_user(username=name, password=password, **fields)

    return make


@pytest.fixture
def owner(make_user):
    return make_user("owner")


@pytest.fixture
def other_owner(make_user):
    return make_user("intruder")


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def owner_client(api_client, owner):
    api_client.force_authenticate(owner)
    return api_client


@pytest.fixture
def other_client(other_owner):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(other_owner)
    return client


@pytest.fixture(scope="session", autouse=True)
def _terminate_stray_test_db_sessions(django_db_setup, django_db_blocker):
    """Sessions left by socket threads or killed workers must not block dropping the test database."""
    yield
    from django.db import connection

    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            cursor.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = current_database() and pid <> pg_backend_pid()"
            )


@pytest.fixture
def services_path():
    """A folder for embedded servers a test starts itself, outside pytest's temporary root.

    pytest makes /tmp/pytest-of-<user> private (0700) whenever a session starts; PostgreSQL runs as another
    user and must reach its data folder for as long as the server lives, so those folders live elsewhere.
    """
    import shutil
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp(prefix="opencompany-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def provider_requests(monkeypatch):
    """Every request this process sends through ChatUnifier, as plain message lists (what the provider received;
    a firing keeps no copy of its list once it ended)."""
    from providers import ChatUnifier

    sent: list[list[dict]] = []
    original = ChatUnifier.chat

    def recording_chat(self, request, on_event=None, should_stop=None):
        sent.append(json.loads(json.dumps(list(request.messages))))
        return original(self, request, on_event=on_event, should_stop=should_stop)

    monkeypatch.setattr(ChatUnifier, "chat", recording_chat)
    return sent


@pytest.fixture
def browser_page(tmp_path):
    """A page of Debian's Chromium (Playwright), closed after the test; a module may ask for another size."""
    from tests.processes import chromium_page

    with chromium_page(tmp_path / "profile", height=900) as page:
        yield page


@pytest.fixture
def broker(settings, monkeypatch):
    """What the code sends to the broker, kept instead of sent (tests/broker.py): no task reaches a worker."""
    from tests.broker import hold_broker

    return hold_broker(monkeypatch, settings)


@pytest.fixture
def inline(settings):
    """Firings run their steps in this process, one after another (AGENT_EXECUTION_MODE=inline)."""
    settings.AGENT_EXECUTION_MODE = "inline"


@pytest.fixture(autouse=True)
def _watchdog_forgets_earlier_sweeps():
    """The agent watchdog keeps when it last reached the database in the cache (agents/services/watchdog.py); a sweep
    from an earlier test would look like an outage to this one's first sweep."""
    yield
    try:
        from django.core.cache import cache

        from agents.services.watchdog import SWEEP_BACK_KEY, SWEEP_SEEN_KEY

        cache.delete_many([SWEEP_SEEN_KEY, SWEEP_BACK_KEY])
    except Exception:
        pass


@pytest.fixture
def capture_events(monkeypatch):
    """The events actions send from now on, instead of sending them (tests/events.py)."""
    from tests.events import EventCapture

    return EventCapture(monkeypatch)


VERTEX_TOKEN = "ya29.test-vertex-token"


@pytest.fixture
def anthropic_fake(monkeypatch):
    from tests.fakes import FakeAnthropic

    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-runtime")
        yield fake


# The fake Vertex AI Agent Engine: the runtime tests and the MCP tests' Vertex runtime use it.
@pytest.fixture
def vertex_fake(monkeypatch):
    from tests.fakes import FakeVertexInteractions

    with FakeVertexInteractions(project="P", location="L") as fake:
        fake.accepted_tokens = {VERTEX_TOKEN}
        monkeypatch.setenv("VERTEX_AGENT_BASE_URL", fake.base_url)
        monkeypatch.setenv("VERTEX_AGENT_CREDENTIALS", VERTEX_TOKEN)
        monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
        yield fake


# Files that take minutes each (several real servers restarted, every API operation fuzzed): under pytest-xdist
# (dev.py test) a file is one unit of work, handed out in collection order, so the longest go first and the short
# ones fill in behind them instead of one long file starting last and running alone.
LONGEST_FIRST = ("tests/scaleout/", "tests/security/test_schemathesis")


def pytest_collection_modifyitems(config, items):
    def weight(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith(LONGEST_FIRST):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=weight)  # stable: a file's tests keep their order
