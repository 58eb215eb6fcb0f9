import subprocess

import pytest
import redis

from tests.processes import start_spare_redis

pytestmark = pytest.mark.django_db


def _beat(url, settings):
    import time

    redis.Redis.from_url(url).set(settings.CELERY_WORKER_HEARTBEAT_KEY, str(time.time()))


def test_healthz_is_200_with_every_component_up(client, settings):
    _beat(settings.REDIS_URL, settings)
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok" and body["failing"] == []
    assert body["database"]["ok"] and body["redis"]["ok"] and body["worker"]["ok"]


def test_healthz_names_redis_when_it_is_down_and_recovers(client, settings, tmp_path):
    process, url = start_spare_redis(tmp_path)
    settings.REDIS_URL = url
    try:
        _beat(url, settings)
        assert client.get("/healthz").status_code == 200
        process.terminate()
        process.wait(timeout=10)
        response = client.get("/healthz")
        assert response.status_code == 503
        assert "redis" in response.json()["failing"]
        assert url not in response.content.decode() and "127.0.0.1" not in response.content.decode()
    finally:
        if process.poll() is None:
            process.kill()
    # The same port comes back: health follows without a restart of the web process.
    port = url.rsplit(":", 1)[1].split("/")[0]
    from core.embedded import redis_server_binary

    again = subprocess.Popen(
        [redis_server_binary(), "--port", port, "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from tests.processes import wait_for_port

        wait_for_port(int(port), timeout=10)
        _beat(url, settings)
        assert client.get("/healthz").status_code == 200
    finally:
        again.kill()


def test_healthz_reports_a_missing_worker(client, settings):
    redis.Redis.from_url(settings.REDIS_URL).delete(settings.CELERY_WORKER_HEARTBEAT_KEY)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["worker"]


def test_healthz_never_shows_connection_strings(client, settings):
    _beat(settings.REDIS_URL, settings)
    text = client.get("/healthz").content.decode()
    assert settings.DATABASES["default"]["NAME"] not in text
    assert str(settings.DATABASES["default"]["PORT"]) not in text
    assert "redis://" not in text and "postgres://" not in text


def _beat_queues(settings, *queues, age: float = 0.0):
    import time

    from core.health import queue_heartbeat_key

    client = redis.Redis.from_url(settings.REDIS_URL)
    for queue in (settings.CELERY_QUEUE_AGENT, settings.CELERY_QUEUE_HOUSEKEEPING):
        client.delete(queue_heartbeat_key(queue))
    for queue in queues:
        client.set(queue_heartbeat_key(queue), str(time.time() - age))


def test_live_touches_no_dependency(client):
    from unittest import mock

    with mock.patch("core.health._check_database", side_effect=AssertionError("touched")):
        response = client.get("/healthz/live")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_ready_is_200_with_database_redis_and_a_worker_per_queue(client, settings):
    _beat_queues(settings, settings.CELERY_QUEUE_AGENT, settings.CELERY_QUEUE_HOUSEKEEPING)
    response = client.get("/healthz/ready")
    body = response.json()
    assert response.status_code == 200 and body["failing"] == [], body
    assert body["database"]["ok"] and body["redis"]["ok"] and body["worker_agent"]["ok"]


def test_ready_names_the_queue_without_a_worker(client, settings):
    _beat_queues(settings, settings.CELERY_QUEUE_HOUSEKEEPING)
    response = client.get("/healthz/ready")
    assert response.status_code == 503 and response.json()["failing"] == ["worker_agent"]
    assert response["Retry-After"]
    _beat_queues(settings, settings.CELERY_QUEUE_AGENT, age=settings.CELERY_WORKER_HEARTBEAT_TTL + 5)
    assert set(client.get("/healthz/ready").json()["failing"]) == {"worker_agent", "worker_housekeeping"}


def test_ready_answers_at_its_deadline_when_a_check_hangs(client, settings):
    import threading
    from unittest import mock

    _beat_queues(settings, settings.CELERY_QUEUE_AGENT, settings.CELERY_QUEUE_HOUSEKEEPING)
    settings.HEALTH_CHECK_TIMEOUT_SECONDS = 0.3
    released, returned = threading.Event(), threading.Event()

    def hang():
        released.wait(60)  # a check that does not come back on its own while the test runs
        returned.set()
        return {"ok": True}

    try:
        with mock.patch("core.health._check_database_fresh", side_effect=hang):
            response = client.get("/healthz/ready")
        # The answer came while the check still hung: the probe's deadline, not the check, ended the wait.
        assert not returned.is_set()
    finally:
        released.set()
    assert response.status_code == 503
    assert response.json()["database"] == {"ok": False, "error": "timeout"}


def test_ready_names_redis_when_it_is_down_from_the_refusal_not_the_deadline(client, settings, tmp_path):
    process, url = start_spare_redis(tmp_path)
    settings.REDIS_URL = url
    settings.HEALTH_CHECK_TIMEOUT_SECONDS = 60  # a check that waited for its deadline would say "timeout"
    process.terminate()
    process.wait(timeout=10)
    response = client.get("/healthz/ready")
    body = response.json()
    assert response.status_code == 503 and {"redis", "worker_agent", "worker_housekeeping"} <= set(body["failing"])
    # The refused connection is the check's own answer: the outage is seen at once, not waited out.
    assert body["redis"] == {"ok": False, "error": "ConnectionError"}, body["redis"]
    assert url not in response.content.decode()


@pytest.mark.slow
def test_a_worker_beats_for_each_queue_it_consumes(tmp_path, client, settings):
    import time

    from tests.processes import start_celery_worker

    _beat_queues(settings)
    worker = start_celery_worker(tmp_path, name="agent-only", queues=settings.CELERY_QUEUE_AGENT, concurrency=1)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            body = client.get("/healthz/ready").json()
            if body["worker_agent"]["ok"]:
                break
            time.sleep(0.2)
        assert body["worker_agent"]["ok"], body
        assert body["failing"] == ["worker_housekeeping"], body
    finally:
        worker.stop()
