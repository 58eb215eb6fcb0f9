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
    from opencompany.embedded import _redis_server_binary

    again = subprocess.Popen(
        [_redis_server_binary(), "--port", port, "--bind", "127.0.0.1", "--save", ""],
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
