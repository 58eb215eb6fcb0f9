"""The README's main command, run for real: fresh data folder, embedded services, demo login."""

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from tests.processes import REPO_ROOT, free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def _opener():
    jar = http.cookiejar.CookieJar()
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar)), jar


def _start_main_command(tmp_path, *, data, port: int, **extra_env: str):
    """`python3 dev.py run` as a user starts it (no DATABASE_URL/REDIS_URL: embedded services), its output logged."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(
        {
            "OPENCOMPANY_DATA_DIR": str(data),
            "OPENCOMPANY_PORT": str(port),
            "OPENCOMPANY_WORKER_CONCURRENCY": "1",
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
    )
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "dev.py", "run"],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process, log_path


def _wait_for_health(base: str, process, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        assert process.poll() is None, "the main command exited early"
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2) as response:
                if response.status == 200:
                    return {"status": 200}
        except Exception as exc:  # 503 while the worker starts, refused before the server binds
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"/healthz never answered 200: {last}")


def test_the_main_command_serves_login_and_the_demo_login_works(tmp_path, services_path):
    port = free_port()
    process, log_path = _start_main_command(tmp_path, data=services_path / "data", port=port)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_health(base, process, timeout=180)
        wait_until(lambda: "running at" in log_path.read_text(), timeout=20, what="the banner")
        output = log_path.read_text()
        password = re.search(r"Login: demo\s+Password: (\S+)", output).group(1)
        assert f"OpenCompany is running at {base}/" in output
        assert "data in" in output  # where the data lives is printed

        opener, jar = _opener()
        page = opener.open(base + "/login/").read().decode()
        assert "Log in" in page
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        form = urllib.parse.urlencode({"username": "demo", "password": password, "csrfmiddlewaretoken": csrf}).encode()
        request = urllib.request.Request(base + "/login/", data=form, headers={"Referer": base + "/login/"})
        home = opener.open(request).read().decode()
        assert "Your workflows" in home and "Demo assistant" in home
        # The page's stylesheet is served by the same process.
        with opener.open(base + "/static/css/app.css") as css:
            assert css.status == 200 and b"--accent" in css.read()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert process.returncode == 0, log_path.read_text()[-3000:]
    # Ctrl-C stopped the embedded PostgreSQL too.
    assert not (services_path / "data" / "postgres" / "postmaster.pid").exists()


def test_the_main_command_restarts_an_embedded_postgres_that_is_shutting_down_and_says_so(tmp_path, services_path):
    from core.embedded.postgres_server import _pg_bin, _run_as_pg_user

    port = free_port()
    data = services_path / "data"
    process, log_path = _start_main_command(tmp_path, data=data, port=port, OPENCOMPANY_PG_SHARED_BUFFERS="32MB")
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_health(base, process, timeout=180)
        # A smart shutdown: the web and worker pools keep their sessions, so it would wait for them forever.
        _run_as_pg_user([_pg_bin("pg_ctl"), "-D", str(data / "postgres"), "-m", "smart", "-W", "stop"])
        wait_until(
            lambda: "Embedded PostgreSQL is shutting down: started it again" in log_path.read_text(),
            timeout=60,
            what="dev.py run to notice and restart the server",
        )
        _wait_for_health(base, process, timeout=60)
        assert "stopping" not in (data / "postgres" / "postmaster.pid").read_text()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
