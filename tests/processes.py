"""Real processes for tests: Celery workers, web servers and spare Redis servers.

Workers and servers run the product's own entry points in subprocesses, pointed at the
test database pytest-django created, so a test exercises the same path production does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_for_tests() -> str:
    params = connection.settings_dict
    password = f":{params['PASSWORD']}" if params.get("PASSWORD") else ""
    return f"postgres://{params['USER']}{password}@{params['HOST']}:{params['PORT']}/{params['NAME']}"


def child_env(**extra: str) -> dict:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "opencompany.settings.base",
        "DATABASE_URL": database_url_for_tests(),
        "REDIS_URL": settings.REDIS_URL,
        "PYTHONUNBUFFERED": "1",
        "OPENCOMPANY_QUIET_EMBEDDED": "1",
        "LOG_LEVEL": "WARNING",
    }
    env.update(extra)
    return env


class ManagedProcess:
    def __init__(self, args: list[str], env: dict, log_path: Path):
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self._terminated = False
        self.process = subprocess.Popen(
            args, cwd=REPO_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group: a Celery worker's pool children die with it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM, once) without waiting: stopping several processes, signal them all first so
        their shutdowns overlap instead of adding up."""
        if self.process.poll() is None and not self._terminated:
            self.kill(signal.SIGTERM)
            self._terminated = True

    def stop(self, timeout: float = 15) -> None:
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.process.wait(timeout=5)
        self._log.close()


def celery_worker_args(
    name: str, *, concurrency: int = 2, queues: str = "agent,housekeeping", beat_schedule: Path | None = None
) -> list[str]:
    args = [sys.executable, "-m", "celery", "-A", "opencompany", "worker", "-Q", queues, "-c", str(concurrency)]
    args += ["-n", f"{name}@%h", "--loglevel", "INFO", "--without-mingle", "--without-gossip"]
    if beat_schedule is not None:
        args += ["-B", "-s", str(beat_schedule)]
    return args


def web_server_args(port: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "opencompany.asgi:application"]


def start_celery_worker(
    tmp_path: Path,
    *,
    name: str = "w1",
    concurrency: int = 2,
    queues: str = "agent,housekeeping",
    beat: bool = False,
    **env,
) -> ManagedProcess:
    process = _spawn_celery_worker(tmp_path, name=name, concurrency=concurrency, queues=queues, beat=beat, **env)
    wait_for_log(process, "ready.", timeout=60)
    return process


def start_web_server(tmp_path: Path, *, name: str = "web1", **env) -> tuple[ManagedProcess, str]:
    process, port = _spawn_web_server(tmp_path, name=name, **env)
    wait_for_port(port, process, timeout=60)
    return process, f"http://127.0.0.1:{port}"


def _spawn_celery_worker(tmp_path: Path, *, name: str, concurrency: int, queues: str, beat: bool, **env):
    schedule = tmp_path / f"beat-{name}" if beat else None
    args = celery_worker_args(name, concurrency=concurrency, queues=queues, beat_schedule=schedule)
    return ManagedProcess(args, child_env(**env), tmp_path / f"worker-{name}.log")


def _spawn_web_server(tmp_path: Path, *, name: str, **env) -> tuple[ManagedProcess, int]:
    port = free_port()
    return ManagedProcess(web_server_args(port), child_env(**env), tmp_path / f"{name}.log"), port


def wait_for_log(process: ManagedProcess, needle: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in process.log():
            return
        if process.process.poll() is not None:
            raise RuntimeError(f"process exited early:\n{process.log()[-4000:]}")
        time.sleep(0.1)
    raise TimeoutError(f"{needle!r} not seen in time:\n{process.log()[-4000:]}")


def wait_for_port(port: int, process: ManagedProcess | None = None, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        if process is not None and process.process.poll() is not None:
            raise RuntimeError(f"process exited early:\n{process.log()[-4000:]}")
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def start_spare_redis(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    from core.embedded import redis_server_binary

    port = free_port()
    process = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port, timeout=10)
    return process, f"redis://127.0.0.1:{port}/0"


# Debian's Chromium, as Playwright drives it here: no browser download, and none of Chromium's background
# connections (this machine has no network; refused connections would only slow each start).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def serve_repo_static(route) -> None:
    """A Playwright route handler for /static/: daphne serves no static files (collectstatic and a front server do
    in production), so the repo's own folder is served and the test needs no collect."""
    import mimetypes

    path = REPO_ROOT / "static" / route.request.url.split("/static/", 1)[1].split("?")[0]
    if not path.is_file():
        return route.fulfill(status=404, body="")
    return route.fulfill(
        status=200, body=path.read_bytes(), content_type=mimetypes.guess_type(str(path))[0] or "text/plain"
    )


@contextlib.contextmanager
def chromium_context(profile_dir: Path, *, width: int = 1100, height: int = 900, touch: bool = False):
    """A persistent Chromium context (Debian's binary, driven by Playwright) with the repo's static files served;
    the test is skipped where Chromium is not installed."""
    import re

    import pytest

    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile_dir),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": width, "height": height},
            has_touch=touch,  # a touch screen: taps reach the page as touch events
            # wait_for_function("<expression>") evaluates a string, which the page's CSP forbids (no unsafe-eval);
            # the pages themselves run under the enforced policy in tests/browser/test_csp.py.
            bypass_csp=True,
        )
        context.route(re.compile(r".*/static/.*"), serve_repo_static)
        try:
            yield context
        finally:
            context.close()


@contextlib.contextmanager
def chromium_page(profile_dir: Path, *, width: int = 1100, height: int = 900, touch: bool = False):
    """The one page of a `chromium_context`; a script error on it fails the test."""
    with chromium_context(profile_dir, width=width, height=height, touch=touch) as context:
        page = context.pages[0] if context.pages else context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
    assert not errors, errors


@contextlib.contextmanager
def running_site(tmp_path: Path, *, web_env: dict | None = None, **worker_env: str):
    """A Celery worker (with `worker_env`) and a web server (with `web_env`), as the browser tests drive them;
    yields the site's base URL and stops both after. Both start, and stop, side by side: each is a Python process
    importing the whole project, and the browser tests start a pair each."""
    worker = _spawn_celery_worker(
        tmp_path, name="w1", concurrency=2, queues="agent,housekeeping", beat=False, **worker_env
    )
    web = None
    try:
        web, port = _spawn_web_server(tmp_path, name="web1", **(web_env or {}))
        wait_for_log(worker, "ready.", timeout=60)
        wait_for_port(port, web, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        # Killed, not asked to stop: a warm Celery shutdown waits for its tasks, and nothing here needs a clean exit.
        stopping = [process for process in (web, worker) if process is not None]
        for process in stopping:
            process.kill(signal.SIGKILL)
        for process in stopping:
            process.stop()
