"""The production shape on one machine: several web and worker processes on one PostgreSQL and one Redis.

The cluster gets its own embedded PostgreSQL and Redis (in a temporary folder, reached only through
DATABASE_URL / REDIS_URL like managed servers), so tests may restart them without touching the
database the rest of the suite runs on. What its PostgreSQL holds at the start (migrated, the demo owner and
workflow, an API token) is made once per test session by `ClusterTemplate` and copied into each cluster's folder:
a migrate and four Django start-ups per cluster cost tens of seconds on a small machine.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
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

# Run once in the template's own Django process: migrate, then what a fresh install's owner does (seed the demo,
# make an API token), printing what the clusters need to log in.
_SEED = """
import io, json, re
import django
django.setup()
from django.core.management import call_command
from workflows.models import Workflow
call_command("migrate", interactive=False, verbosity=0)
seeded = io.StringIO()
call_command("seed_demo", stdout=seeded)
token = io.StringIO()
call_command("create_api_token", "demo", stdout=token)
print(json.dumps({
    "password": re.search(r"Password: (\\S+)", seeded.getvalue()).group(1),
    "token": token.getvalue().strip().splitlines()[-1],
    "workflow_id": Workflow.objects.get(owner__username="demo").pk,
}))
"""

# What a copy takes from the template's services folder: PostgreSQL's data and the password it was made with. Not
# the state files (each cluster picks free ports of its own) and not Redis (each cluster's starts empty, as a
# fresh one did before: migrate and seed_demo leave nothing in it a test reads).
_TEMPLATE_SERVICES = ("postgres", "postgres.password")


def _base_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}


def _services_python(services_dir: Path, code: str, *, timeout: float) -> str:
    """Run `code` against the embedded services in `services_dir` (not the app's environment); its stdout."""
    env = {**_base_env(), "OPENCOMPANY_DATA_DIR": str(services_dir), "OPENCOMPANY_QUIET_EMBEDDED": "1"}
    done = _run([sys.executable, "-c", f"from core import embedded as e; {code}"], env, timeout, check=False)
    assert done.returncode == 0, f"embedded services: {code} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def _app_env(root: Path, database_url: str, redis_url: str, **env: str) -> dict:
    return {
        **_base_env(),
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "opencompany.settings.base",
        "OPENCOMPANY_DATA_DIR": str(root / "app"),  # its secret_key: the one the template's data was made with
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "INFO",
        **env,
    }


@dataclass(frozen=True)
class ClusterTemplate:
    """A cluster's starting data, made once: PostgreSQL initialised, migrated and seeded, then stopped cleanly (a
    stopped server's folder is a consistent copy)."""

    root: Path
    password: str
    token: str
    workflow_id: int

    @classmethod
    def build(cls, root: Path) -> ClusterTemplate:
        services_dir = root / "services"
        try:
            database_url, redis_url = _services_python(
                services_dir, "print(e.ensure_postgres()); print(e.ensure_redis())", timeout=180
            ).split()[-2:]
            out = _run([sys.executable, "-c", _SEED], _app_env(root, database_url, redis_url), 600).stdout
        finally:
            _services_python(services_dir, "e.stop_all()", timeout=180)
        seeded = json.loads(out.strip().splitlines()[-1])
        assert not (services_dir / "postgres" / "postmaster.pid").exists(), "the template's PostgreSQL still runs"
        return cls(root=root, password=seeded["password"], token=seeded["token"], workflow_id=seeded["workflow_id"])

    def copy_into(self, root: Path) -> None:
        """The template's data into a new cluster's folder. Modes are kept (PostgreSQL's folder stays 0700); the
        owner of the copies is set back to PostgreSQL's user by `ensure_postgres` before the server starts."""
        services_dir = root / "services"
        services_dir.mkdir()
        for name in _TEMPLATE_SERVICES:
            source = self.root / "services" / name
            if source.is_dir():
                shutil.copytree(source, services_dir / name, symlinks=True)
            else:
                shutil.copy2(source, services_dir / name)
        shutil.copytree(self.root / "app", root / "app", symlinks=True)


# The clusters made during the running test: a failed test's report carries their processes' logs
# (tests/scaleout/conftest.py), which live in a folder removed when the test ends.
made: list[Cluster] = []


class Cluster:
    def __init__(self, root: Path, template: ClusterTemplate, **env: str):
        self.root = root
        self.services_dir = root / "services"
        self.processes: dict[str, ManagedProcess] = {}
        self.web_urls: dict[str, str] = {}
        made.append(self)
        template.copy_into(root)
        self.password, self.token, self.workflow_id = template.password, template.token, template.workflow_id
        self.database_url, self.redis_url = self._services("start")
        self.env = _app_env(root, self.database_url, self.redis_url, **env)

    # --- services -----------------------------------------------------------------------------
    def _services_python(self, code: str, *, timeout: float) -> str:
        return _services_python(self.services_dir, code, timeout=timeout)

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
        """Run `code` in a Python process with the cluster's app environment; its stdout."""
        return _run([sys.executable, "-c", code], self.env, 180).stdout

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
            process.terminate()
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
