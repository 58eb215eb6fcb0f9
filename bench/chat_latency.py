#!/usr/bin/env python
"""Chat latency as the page sees it: from the send request to the first text delta on the page's socket, and to
the run's finished event. Offline provider at zero delay, through a real web server (daphne), a real Celery worker
and the Redis broker / channel layer.

    OPENCOMPANY_DATA_DIR=/tmp/oc-bench .venv/bin/python bench/chat_latency.py [--sends 100] [--concurrency 2]

It migrates the data dir's database, creates a throwaway owner and workflow, starts its own web server and worker
processes, sends N messages one after another (each after the previous answer finished, as an owner would) and
prints p50/p95/max. It removes what it made.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# Figures are for the production setting: DEBUG keeps every query's SQL in memory and costs time per statement.
os.environ.setdefault("DEBUG", "0")
if not os.environ.get("SECRET_KEY"):  # production settings need one; this run's rows are its own
    import secrets

    os.environ["SECRET_KEY"] = secrets.token_urlsafe(48)

import django  # noqa: E402
from figures import percentile  # noqa: E402  (bench/, the script's own folder)

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from accounts.tokens import api_token_create  # noqa: E402
from workflows.services import workflow_create, workflow_delete, workflow_start  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env() -> dict:
    return {
        **os.environ,
        "DATABASE_URL": settings.DATABASE_URL,
        "REDIS_URL": settings.REDIS_URL,
        "OFFLINE_PROVIDER_DELAY_MS": "0",
        "AGENT_EXECUTION_MODE": "celery",
        "LOG_LEVEL": "WARNING",
        "OPENCOMPANY_QUIET_EMBEDDED": "1",
    }


def start(args: list[str], log_name: str) -> subprocess.Popen:
    log = open(os.environ.get("BENCH_LOG_DIR", "/tmp") + f"/chat-bench-{log_name}.log", "w")  # noqa: SIM115
    return subprocess.Popen(args, cwd=ROOT, env=child_env(), stdout=log, stderr=subprocess.STDOUT)


def wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def make_workflow(owner):
    graph = {
        "nodes": [
            {"id": "t", "type": "chatTrigger", "params": {}},
            {
                "id": "a",
                "type": "agent",
                "params": {"name": "Bench", "provider": "offline", "model": "offline-echo", "system_prompt": "Hi."},
            },
            {"id": "c", "type": "context", "params": {}},
        ],
        "edges": [
            {"source": "t", "sourceHandle": "output-main", "target": "a", "targetHandle": "input-main"},
            {"source": "c", "sourceHandle": "output-context", "target": "a", "targetHandle": "input-context"},
        ],
    }
    workflow = workflow_create(owner=owner, name="chat latency bench", graph=graph).workflow
    workflow_start(workflow=workflow)
    return workflow


class SocketListener:
    """The page's socket: records when each run's first delta and its end event arrive."""

    def __init__(self, url: str, cookie: str):
        self._connection = connect(url, additional_headers={"Cookie": cookie, "Origin": "http://127.0.0.1"})
        self.ws = self._connection.__enter__()  # the context-manager form; closed in close()
        hello = json.loads(self.ws.recv(timeout=10))
        assert hello["type"] == "hello", hello
        self.first_delta: dict[int, float] = {}
        self.finished: dict[int, float] = {}
        self.gaps = 0
        self.error: Exception | None = None
        self._seq: dict[int, int] = {}
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for raw in self.ws:
                now = time.perf_counter()
                event = json.loads(raw)
                run_id = event.get("run_id")
                if run_id is None:
                    continue
                with self._cond:
                    if event["seq"] != self._seq.get(run_id, 0) + 1:
                        self.gaps += 1
                    self._seq[run_id] = event["seq"]
                    if event["type"] == "run.delta":
                        self.first_delta.setdefault(run_id, now)
                    elif event["type"] in ("run.finished", "run.failed"):
                        self.finished[run_id] = now
                        self._cond.notify_all()
        except Exception as exc:  # the socket closed (the bench is ending) or broke: say so, waits time out
            self.error = exc

    def wait_finished(self, run_id: int, timeout: float = 30) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: run_id in self.finished, timeout=timeout):
                raise TimeoutError(f"run {run_id} did not finish")

    def close(self) -> None:
        self._connection.__exit__(None, None, None)


def breakdown(workflow) -> None:
    """Where the time goes, from database timestamps (one clock): admission -> prepared -> call -> persisted."""
    from agents.models import Firing, LlmStep
    from chat.models import ChatRun

    rows = {"admit->prepared": [], "prepared->llm call": [], "llm call": [], "call done->run ended": []}
    for run in ChatRun.objects.filter(session__workflow=workflow).order_by("-id")[:100]:
        firing = Firing.objects.get(pk=run.firing_id)
        step = LlmStep.objects.filter(firing=firing).order_by("iteration").first()
        rows["admit->prepared"].append((firing.started_at - run.created_at).total_seconds() * 1000)
        rows["prepared->llm call"].append((step.started_at - firing.started_at).total_seconds() * 1000)
        rows["llm call"].append((step.finished_at - step.started_at).total_seconds() * 1000)
        rows["call done->run ended"].append((run.finished_at - step.finished_at).total_seconds() * 1000)
    for name, values in rows.items():
        print(f"    {name:<24} p50 {statistics.median(values):6.1f} ms  p95 {percentile(values, 0.95):6.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)

    owner = get_user_model().objects.create_user(username=f"chat-bench-{os.getpid()}-{int(time.time())}")
    token = api_token_create(user=owner, name="bench").raw_key
    client = Client()
    client.force_login(owner)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    workflow = make_workflow(owner)
    port = free_port()
    worker = start(
        [sys.executable, "-m", "celery", "-A", "opencompany", "worker", "-Q", "agent", "-c", str(args.concurrency),
         "--loglevel", "WARNING", "--without-mingle", "--without-gossip", "-n", f"chatbench{os.getpid()}@%h"],
        "worker",
    )  # fmt: skip
    web = start([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "opencompany.asgi:application"],
                "web")  # fmt: skip
    listener = None
    try:
        wait_port(port)
        listener = SocketListener(f"ws://127.0.0.1:{port}/ws/workflows/{workflow.pk}/", cookie)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json", "Host": "127.0.0.1"}
        path = f"/api/workflows/{workflow.pk}/chat/messages/"

        def send(text: str) -> tuple[int, float]:
            started = time.perf_counter()
            conn.request("POST", path, body=json.dumps({"text": text}), headers=headers)
            response = conn.getresponse()
            body = json.loads(response.read())
            if response.status != 201:
                raise RuntimeError(f"send refused: {response.status} {body}")
            return body["run"]["id"], started

        for i in range(5):  # warm up: worker pool processes import and connect on their first tasks
            run_id, _ = send(f"warm up {i}")
            listener.wait_finished(run_id, timeout=120)
        to_delta, to_finished, posts = [], [], []
        for i in range(args.sends):
            run_id, started = send(f"message {i}: how are you today?")
            posts.append((time.perf_counter() - started) * 1000)
            listener.wait_finished(run_id)
            to_delta.append((listener.first_delta[run_id] - started) * 1000)
            to_finished.append((listener.finished[run_id] - started) * 1000)

        def line(name: str, values: list[float]) -> str:
            return (
                f"  {name:<28} p50 {statistics.median(values):6.1f} ms  p95 {percentile(values, 0.95):6.1f} ms  "
                f"max {max(values):6.1f} ms"
            )

        print(f"chat latency over {args.sends} sends, offline provider at zero delay, web (daphne) + worker "
              f"(concurrency {args.concurrency}) + Redis broker/channel layer")  # fmt: skip
        print(line("send -> response", posts))
        print(line("send -> first text delta", to_delta))
        print(line("send -> finished event", to_finished))
        print(f"  seq gaps seen on the socket: {listener.gaps}")
        if os.environ.get("BENCH_BREAKDOWN"):
            breakdown(workflow)
    finally:
        if listener is not None:
            listener.close()
        for process in (web, worker):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        workflow_delete(workflow=workflow)
        owner.delete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
