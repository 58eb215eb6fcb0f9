"""Housekeeping of a real web app: content-hashed static files with a long cache, a favicon, API docs from the
installed sidecar (no CDN), quiet logs (no ERROR while the worker starts, periodic tasks at DEBUG)."""

from __future__ import annotations

import logging

import pytest
from django.core.management import call_command
from django.test import RequestFactory, override_settings

pytestmark = pytest.mark.django_db

MANIFEST = {"staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"}}


def test_collected_static_files_have_hashed_names_and_a_year_long_cache(tmp_path, settings):
    from django.core.asgi import get_asgi_application
    from django.templatetags.static import static

    from core.static_files import LONG_CACHE, SHORT_CACHE, StaticFiles

    storages = {**settings.STORAGES, **MANIFEST}
    with override_settings(STATIC_ROOT=tmp_path, STATIC_HASHED=True, STORAGES=storages):
        call_command("collectstatic", "--no-input", "-v", "0")
        url = static("js/chat.js")
        assert url.startswith("/static/js/chat.") and url != "/static/js/chat.js" and url.endswith(".js")
        handler = StaticFiles(get_asgi_application())
        hashed = handler.serve(RequestFactory().get(url))
        assert hashed.status_code == 200 and hashed["Cache-Control"] == LONG_CACHE
        assert b"".join(hashed.streaming_content).startswith(b"// The chat page")
        plain = handler.serve(RequestFactory().get("/static/js/chat.js"))
        assert plain.status_code == 200 and plain["Cache-Control"] == SHORT_CACHE


def test_the_favicon_is_answered(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"].endswith("favicon.svg")
    from django.contrib.staticfiles import finders

    assert open(finders.find("favicon.svg")).read().startswith("<svg")


def test_api_docs_load_their_ui_from_the_installed_sidecar(client, django_user_model):
    user = django_user_model.objects.create_user("docs-reader", password="pw-docs-reader-1")
    client.force_login(user)
    for path in ("/api/docs/",):
        page = client.get(path).content.decode()
        assert "/static/drf_spectacular_sidecar/" in page, path
        assert "cdn" not in page.lower() and "https://" not in page, path


def test_a_503_while_the_worker_starts_is_no_error_line(client, monkeypatch, caplog):
    from core import health

    monkeypatch.setattr(health, "_check_worker", lambda redis_ok: {"ok": False, "reason": "no heartbeat"})
    with caplog.at_level(logging.INFO):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.levelname for r in caplog.records if r.name == "core.health"] == ["INFO"]


def test_periodic_task_lines_are_debug_and_other_task_lines_stay_info():
    from core.logfmt import QuietPeriodicTasks

    quiet = QuietPeriodicTasks(["opencompany.worker_heartbeat", "chat.watchdog"])
    logging.getLogger("celery.app.trace").setLevel(logging.INFO)

    def record(name, message):
        return logging.LogRecord(name, logging.INFO, __file__, 1, message, (), None)

    heartbeat = record("celery.app.trace", "Task opencompany.worker_heartbeat[abc] succeeded in 0.001s: None")
    assert quiet.filter(heartbeat) is False and heartbeat.levelname == "DEBUG"
    beat = record("celery.beat", "Scheduler: Sending due task chat-watchdog (chat.watchdog)")
    assert quiet.filter(beat) is False
    work = record("celery.app.trace", "Task agent.execute_llm_step[abc] succeeded in 0.2s: None")
    assert quiet.filter(work) is True and work.levelname == "INFO"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("hashed", [False, True])
@pytest.mark.parametrize("path", ["/static/..%2fmanage.py", "/static/js/..%2f..%2fmanage.py", "/static/../manage.py"])
def test_a_static_path_that_climbs_out_is_a_404_with_the_security_headers(path, hashed, tmp_path):
    """`..%2f` reaches the ASGI app decoded (`../`): it was a bare 500 from the finders' SuspiciousFileOperation."""
    from urllib.parse import unquote

    from asgiref.sync import async_to_sync
    from channels.testing import HttpCommunicator

    from opencompany.asgi import application

    with override_settings(STATIC_HASHED=hashed, STATIC_ROOT=tmp_path / "collected"):
        (tmp_path / "collected").mkdir()
        communicator = HttpCommunicator(application, "GET", unquote(path))
        response = async_to_sync(communicator.get_response)(timeout=10)
    headers = {name.decode().lower(): value.decode() for name, value in response["headers"]}
    assert response["status"] == 404
    assert "default-src" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert b"python" not in response["body"].lower()
