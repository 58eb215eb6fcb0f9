"""The production shape on one machine: several web and worker processes on one PostgreSQL and one Redis.

The cluster gets its own embedded PostgreSQL and Redis (in a temporary folder, reached only through
DATABASE_URL / REDIS_URL like managed servers), so tests may restart them without touching the
database the rest of the suite runs on.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from websockets.sync.client import connect as ws_connect

from tests.processes import (
    REPO_ROOT,
    ManagedProcess,
    celery_worker_args,
    free_port,
    wait_for_log,
    wait_for_port,
    web_server_args,
)
from tests.waiting import wait_until


class Cluster:
    def __init__(self, root: Path, **env: str):
        self.root = root
        self.services_dir = root / "services"
        self.processes: dict[str, ManagedProcess] = {}
        self.web_urls: dict[str, str] = {}
        base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
        self._base_env = base
        self.database_url, self.redis_url = self._services("start")
        self.env = {
            **base,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "DJANGO_SETTINGS_MODULE": "opencompany.settings.base",
            "OPENCOMPANY_DATA_DIR": str(root / "app"),
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "INFO",
            **env,
        }
        self._manage("migrate", "--no-input")
        seeded = self._manage("seed_demo")
        self.password = re.search(r"Password: (\S+)", seeded).group(1)
        self.token = self._manage("create_api_token", "demo").strip().splitlines()[-1]
        self.workflow_id = int(
            self._python(
                "import django; django.setup(); from workflows.models import Workflow; "
                "print(Workflow.objects.get(owner__username='demo').pk)"
            )
            .strip()
            .splitlines()[-1]
        )

    # --- services -----------------------------------------------------------------------------
    def _services_python(self, code: str, *, timeout: float) -> str:
        """Run `code` against the cluster's own embedded services (not the app's environment); its stdout."""
        env = {**self._base_env, "OPENCOMPANY_DATA_DIR": str(self.services_dir), "OPENCOMPANY_QUIET_EMBEDDED": "1"}
        done = _run([sys.executable, "-c", f"from core import embedded as e; {code}"], env, timeout, check=False)
        assert done.returncode == 0, f"embedded services: {code} failed:\n{done.stderr[-3000:]}"
        return done.stdout

    def _services(self, action: str) -> tuple[str, str]:
        if action != "start":
            self._services_python("e.stop_all()", timeout=180)
            return "", ""
        out = self._services_python("print(e.ensure_postgres()); print(e.ensure_redis())", timeout=180).split()
        return out[-2], out[-1]

    def restart_redis(self, *, empty: bool = False) -> None:
        """Stop Redis and start it again once every web process has seen it gone (its readiness probe names
        redis): the outage is one the cluster noticed, however fast or slow the machine. `empty` deletes its
        append-only files between (a server that lost its data: queued tasks, group membership, counters, the hub
        epoch)."""
        self._services_python("e.stop_redis()", timeout=60)
        if empty:
            redis_dir = self.services_dir / "redis"
            shutil.rmtree(redis_dir / "appendonlydir", ignore_errors=True)  # Redis 7's layout
            for name in ("appendonly.aof", "dump.rdb"):
                (redis_dir / name).unlink(missing_ok=True)
        for web in self.web_urls:
            wait_until(lambda web=web: "redis" in self.ready(web).get("failing", []), what=f"{web} to see Redis gone")
        url = self._services_python("print(e.ensure_redis())", timeout=60).split()[-1]
        assert url == self.redis_url, "Redis came back on another port"

    def restart_postgres(self) -> None:
        url = self._services_python("e.stop_postgres(); print(e.ensure_postgres())", timeout=120).split()[-1]
        assert url == self.database_url, "PostgreSQL came back on another port"

    # --- processes ----------------------------------------------------------------------------
    def _python(self, code: str) -> str:
        return _run([sys.executable, "-c", code], self.env, 180).stdout

    def _manage(self, *args: str) -> str:
        return _run([sys.executable, "manage.py", *args], self.env, 300).stdout

    def start_web(self, name: str) -> str:
        port = free_port()
        process = ManagedProcess(web_server_args(port), self.env, self.root / f"{name}.log")
        wait_for_port(port, process, timeout=60)
        self.processes[name] = process
        self.web_urls[name] = f"http://127.0.0.1:{port}"
        return self.web_urls[name]

    def start_worker(self, name: str, *, beat: bool = False, concurrency: int = 2) -> ManagedProcess:
        schedule = self.root / f"beat-{name}" if beat else None
        args = celery_worker_args(name, concurrency=concurrency, beat_schedule=schedule)
        process = ManagedProcess(args, self.env, self.root / f"{name}.log")
        wait_for_log(process, "ready.", timeout=90)
        self.processes[name] = process
        return process

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop()
        self._services("stop")

    # --- clients ------------------------------------------------------------------------------
    def api(self, web: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(
            self.web_urls[web] + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def ready(self, web: str) -> dict:
        """The web process's readiness probe (a 503 names what is failing)."""
        try:
            with urllib.request.urlopen(self.web_urls[web] + "/healthz/ready", timeout=30) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return json.loads(error.read() or b"{}")

    def session_cookie(self, web: str) -> str:
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        base = self.web_urls[web]
        opener.open(base + "/login/", timeout=30).read()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        form = urllib.parse.urlencode({"username": "demo", "password": self.password, "csrfmiddlewaretoken": csrf})
        opener.open(
            urllib.request.Request(base + "/login/", data=form.encode(), headers={"Referer": base + "/login/"}),
            timeout=30,
        ).read()
        return "; ".join(f"{c.name}={c.value}" for c in jar)

    def socket(self, web: str, cookie: str):
        url = self.web_urls[web].replace("http://", "ws://") + f"/ws/workflows/{self.workflow_id}/"
        # The page's own origin: sockets accept exactly the origin they are served on (core/origins.py).
        origin = self.web_urls[web]
        return ws_connect(url, additional_headers={"Cookie": cookie, "Origin": origin}, open_timeout=20)


def _run(args: list[str], env: dict, timeout: float, *, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=REPO_ROOT, env=env, check=check, capture_output=True, text=True, timeout=timeout)


def collect_until(socket, predicate, *, timeout: float) -> list[dict]:
    """Read events until `predicate(events)` holds; returns everything read."""
    events: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            raw = socket.recv(timeout=max(0.05, deadline - time.monotonic()))
        except TimeoutError:
            break
        events.append(json.loads(raw))
        if predicate(events):
            return events
    raise AssertionError(f"condition not met in {timeout}s; got {[e.get('type') for e in events][-20:]}")
