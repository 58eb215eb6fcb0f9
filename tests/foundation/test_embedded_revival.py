"""Issue 34 (Medium): a half-stopped embedded PostgreSQL is not called healthy, and what `dev.py run` uses to
notice an embedded server that died or is shutting down starts it again, saying so."""

from __future__ import annotations

import os
import signal

import pytest
import redis
import requests

from tests.processes import start_web_server
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spare_data(services_path, monkeypatch):
    """Embedded servers of their own (this module stops and kills them), in a data folder of their own."""
    from core import embedded

    data = services_path / "data"
    monkeypatch.setenv("OPENCOMPANY_DATA_DIR", str(data))
    monkeypatch.setenv("OPENCOMPANY_PG_SHARED_BUFFERS", "32MB")
    try:
        yield data
    finally:
        embedded.stop_all()


def _beat_queues(settings) -> None:
    import time

    from core.health import queue_heartbeat_key

    client = redis.Redis.from_url(settings.REDIS_URL)
    for queue in (settings.CELERY_QUEUE_AGENT, settings.CELERY_QUEUE_HOUSEKEEPING):
        client.set(queue_heartbeat_key(queue), str(time.time()))


def _ready(base_url: str) -> requests.Response:
    return requests.get(f"{base_url}/healthz/ready", timeout=10)


def _postmaster_pid(data) -> int:
    return int((data / "postgres" / "postmaster.pid").read_text().splitlines()[0])


def test_readiness_sees_a_smart_shutdown_and_revival_restarts_a_stopping_or_killed_postgres(
    spare_data, tmp_path, settings
):
    from core.embedded import ensure_postgres
    from core.embedded.postgres_server import _pg_bin, _run_as_pg_user
    from core.embedded.revival import postgres_problem, revive

    url = ensure_postgres()
    web, base_url = start_web_server(tmp_path, DATABASE_URL=url, HEALTH_CHECK_TIMEOUT_SECONDS="1.5")
    try:
        _beat_queues(settings)
        first = _ready(base_url)
        assert first.status_code == 200, first.text  # and the web process's pool now holds a connection
        assert postgres_problem() is None

        # Smart shutdown: new connections are refused, the pooled one keeps working.
        _run_as_pg_user([_pg_bin("pg_ctl"), "-D", str(spare_data / "postgres"), "-m", "smart", "-W", "stop"])
        wait_until(lambda: postgres_problem() == "is shutting down", timeout=20, what="the smart shutdown")
        _beat_queues(settings)
        half_stopped = _ready(base_url)
        assert half_stopped.status_code == 503, half_stopped.text
        assert half_stopped.json()["failing"] == ["database"]
        assert half_stopped.elapsed.total_seconds() < 2  # within the probe's budget (bounds a hang, not speed)

        said = revive(redis=False)
        assert said and "PostgreSQL is shutting down: started it again" in said[0]
        assert postgres_problem() is None
        assert ensure_postgres() == url  # the same port: every process holding the URL reconnects
        _beat_queues(settings)
        wait_until(lambda: _ready(base_url).status_code == 200, timeout=20, what="ready after the restart")

        os.kill(_postmaster_pid(spare_data), signal.SIGKILL)
        wait_until(lambda: postgres_problem() == "died", timeout=20, what="the killed server to be noticed")
        said = revive(redis=False)
        assert said and "PostgreSQL died: started it again" in said[0]
        _beat_queues(settings)
        wait_until(lambda: _ready(base_url).status_code == 200, timeout=20, what="ready after the second restart")
        assert revive() == []  # nothing to do when both run
    finally:
        web.stop()


def test_revival_restarts_a_killed_redis(spare_data):
    from core.embedded import ensure_redis
    from core.embedded.revival import redis_problem, revive

    url = ensure_redis()
    client = redis.Redis.from_url(url)
    client.set("kept", "1")
    os.kill(int((spare_data / "redis" / "redis.pid").read_text()), signal.SIGKILL)
    wait_until(lambda: redis_problem() == "does not answer", timeout=10, what="the killed Redis to be noticed")
    said = revive(postgres=False)
    assert said and "Redis does not answer: started it again" in said[0]
    assert redis.Redis.from_url(url).ping()  # the same URL: same port, same password
