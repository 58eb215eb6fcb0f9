#!/usr/bin/env python
"""Chaos against the real stack, as an operator would see it: one table of faults and what each cost.

    .venv/bin/python bench/chaos.py [--kills 5] [--pg-turns 8] [--redis-turns 10] [--pages 5] [--web-kills 2]
                                    [--garbage 300] [--delay-ms 60] [--only kill,pg,redis,web,garbage]

It starts its own embedded PostgreSQL and Redis in a temporary folder (reached only through DATABASE_URL /
REDIS_URL, like managed servers, so it may stop and wipe them), two daphne web processes, a Celery agent worker and
a housekeeping worker with beat, seeds the demo owner with several workflows (one chat lane each) and the offline
provider (`--delay-ms` between streamed pieces), then injects, one after another:

- kill:    an agent worker SIGKILLed while it streams an answer (`--kills` times; a new worker is started each time);
- pg:      PostgreSQL stopped for 5 s while `--pg-turns` answers stream (an API prober measures what clients get);
- redis:   Redis restarted with its data deleted while `--redis-turns` turns are queued (workers stopped) and
           `--pages` sockets are open;
- web:     the web process serving a page's socket SIGKILLed mid-stream (the page reconnects to the other one);
- garbage: `--garbage` malformed requests (bad ids, bad JSON, wrong types, huge and NUL-laden bodies, odd methods).

For each fault it prints turns, answered, failed, lost, duplicated, stuck, double-billed, 5xx, seconds until open
pages were right, the target and the verdict, then what an operator saw meanwhile (`/healthz/ready`, error codes,
API answers during the outage). Runtime with the defaults: a few minutes on an idle two-core machine.
Loopback only; everything it started is stopped and its folder removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from figures import percentile  # noqa: E402
from websockets.sync.client import connect as ws_connect  # noqa: E402

from tests.processes import ManagedProcess, celery_worker_args, wait_for_log  # noqa: E402
from tests.scaleout.cluster import Cluster, ClusterTemplate  # noqa: E402

ENDED = ("finished", "error", "stopped")
LONG = " ".join(f"w{i}" for i in range(150))  # echoed back in 50 streamed pieces


class Chaos:
    def __init__(self, root: Path, args):
        self.args = args
        self.root = root
        self.call_log = root / "provider-calls.log"
        template = root / "template"
        template.mkdir()
        template.chmod(0o755)  # as root above: PostgreSQL runs as another user and must reach its folder
        self.cluster = Cluster(
            root,
            ClusterTemplate.build(template),
            OFFLINE_PROVIDER_DELAY_MS=str(args.delay_ms),
            OPENCOMPANY_OFFLINE_CALL_LOG=str(self.call_log),
            AGENT_WATCHDOG_INTERVAL_SECONDS="1",
            # Short enough that a killed worker's step is found within the bench's waits; longer than the database
            # outage plus a heartbeat, as in production (20 s by default), so a live step is never taken for lost.
            AGENT_STEP_LOST_AFTER_SECONDS="15",
            WEBSOCKET_REJOIN_SECONDS="2",
            THROTTLE_RATE_API_USER="1000000/minute",
            THROTTLE_RATE_CHAT_SEND="1000000/minute",
            LOG_LEVEL="WARNING",
        )
        self.cluster.start_web("web1")
        self.cluster.start_web("web2")
        self.housekeeping = self._worker("housekeeping", queues="housekeeping", beat=True)
        self.agent = self._worker("agent", queues="agent")
        self.cookie = self.cluster.session_cookie("web2")
        lanes = max(args.pg_turns, args.redis_turns, args.pages, 2)
        self.lanes = [self.cluster.workflow_id] + [self._new_lane(i) for i in range(1, lanes)]

    # --- processes and services --------------------------------------------------------------------------------
    def _worker(self, name: str, *, queues: str, beat: bool = False) -> ManagedProcess:
        schedule = self.root / f"beat-{name}" if beat else None
        args = celery_worker_args(
            f"{name}-{uuid.uuid4().hex[:6]}", concurrency=2, queues=queues, beat_schedule=schedule
        )
        process = ManagedProcess(args, self.cluster.env, self.root / f"{name}-{time.monotonic_ns()}.log")
        wait_for_log(process, "ready.", timeout=120)
        self.cluster.processes[f"{name}-{process.pid}"] = process
        return process

    def restart_postgres(self, down: float) -> float:
        self.cluster._services_python("e.stop_postgres()", timeout=120)
        stopped = time.monotonic()
        time.sleep(down)
        self.cluster._services_python("print(e.ensure_postgres())", timeout=120)
        return time.monotonic() - stopped

    def _new_lane(self, i: int) -> int:
        status, body = self.api(
            "web1", "POST", f"/api/workflows/{self.cluster.workflow_id}/duplicate/", {"name": f"lane {i}"}
        )
        assert status == 201, (status, body)
        status, started = self.api("web1", "POST", f"/api/workflows/{body['id']}/start/", None)
        assert status == 200, (status, started)
        return body["id"]

    # --- clients -----------------------------------------------------------------------------------------------
    def api(self, web: str, method: str, path: str, body=None, timeout: float = 30):
        return (
            self.cluster.api(web, method, path, body) if timeout == 30 else self._api_timed(web, method, path, timeout)
        )

    def _api_timed(self, web, method, path, timeout):
        request = urllib.request.Request(
            self.cluster.web_urls[web] + path, method=method, headers={"Authorization": f"Token {self.cluster.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.headers.get("Content-Type", ""), response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("Content-Type", ""), error.read()

    def send(self, lane: int, text: str, web: str = "web2") -> int:
        for _ in range(50):
            with contextlib.suppress(Exception):
                status, body = self.api(
                    web,
                    "POST",
                    f"/api/workflows/{lane}/chat/messages/",
                    {"text": text, "client_message_id": uuid.uuid4().hex},
                )
                if status == 201:
                    return body["run"]["id"]
            time.sleep(0.2)
        raise RuntimeError(f"could not send on lane {lane}")

    def run_state(self, lane: int, run_id: int, web: str = "web2") -> dict:
        with contextlib.suppress(Exception):
            status, run = self.api(web, "GET", f"/api/workflows/{lane}/chat/runs/{run_id}/")
            if status == 200:
                return run
        return {}

    def wait_streaming(self, lane: int, run_id: int, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run_state(lane, run_id)
            if run.get("partial_text") or run.get("state") in ENDED:
                return bool(run.get("partial_text"))
            time.sleep(0.1)
        return False

    def wait_ended(self, pairs: list[tuple[int, int]], timeout: float) -> dict[int, dict]:
        deadline = time.monotonic() + timeout
        ended: dict[int, dict] = {}
        while time.monotonic() < deadline and len(ended) < len(pairs):
            for lane, run_id in pairs:
                if run_id not in ended:
                    run = self.run_state(lane, run_id)
                    if run.get("state") in ENDED:
                        ended[run_id] = run
            time.sleep(0.3)
        return ended

    def page(self, web: str, lane: int) -> Page:
        return Page(self, web, lane)

    def provider_calls(self) -> int:
        return len(self.call_log.read_text().splitlines()) if self.call_log.exists() else 0

    # --- what PostgreSQL says about a set of runs ---------------------------------------------------------------
    def ledger(self, run_ids: list[int]) -> dict:
        code = f"""
import json, django
django.setup()
from collections import Counter
from agents.models import Firing, LlmStep
from chat.models import ChatMessage, ChatRun
from conversations.models import UsageRecord
ids = {list(run_ids)!r}
runs = {{r.pk: r for r in ChatRun.objects.filter(pk__in=ids)}}
out = {{"lost": 0, "duplicated": 0, "stuck": 0, "answered": 0, "failed": 0, "double_billed": 0, "steps": 0,
       "codes": Counter()}}
for pk in ids:
    run = runs.get(pk)
    if run is None or not ChatMessage.objects.filter(pk=run.user_message_id).exists():
        out["lost"] += 1
        continue
    firings = list(Firing.objects.filter(chat_run_id=pk, parent__isnull=True))
    replies = ChatMessage.objects.filter(parent_id=run.user_message_id, role="assistant").count()
    if len(firings) > 1 or replies > 1:
        out["duplicated"] += 1
    if run.is_active:
        out["stuck"] += 1
    elif run.outcome == "answered":
        out["answered"] += 1
    else:
        out["failed"] += 1
        out["codes"][run.error_code or run.outcome] += 1
    for firing in firings:
        steps = list(LlmStep.objects.filter(firing=firing).values_list("pk", "iteration"))
        out["steps"] += len(steps)
        iterations = Counter(i for _, i in steps)
        keys = [f"llm-step:{{s}}" for s, _ in steps]
        billed = UsageRecord.objects.filter(idempotency_key__in=keys, outcome="ok").count()
        if any(n > 1 for n in iterations.values()) or billed > len(iterations):
            out["double_billed"] += 1
out["codes"] = dict(out["codes"])
print(json.dumps(out))
"""
        return json.loads(self.cluster._python(code).strip().splitlines()[-1])

    def stop(self) -> None:
        self.cluster.stop()


class Page:
    """An open chat page's socket: reads events in a thread and reconnects after a close, as chat.js does."""

    def __init__(self, chaos: Chaos, web: str, lane: int):
        self.chaos, self.web, self.lane = chaos, web, lane
        self.events: list[tuple[float, dict]] = []
        self.closed = threading.Event()
        self.reconnects = 0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        cluster = self.chaos.cluster
        while not self.closed.is_set():
            try:
                url = cluster.web_urls[self.web].replace("http://", "ws://") + f"/ws/workflows/{self.lane}/"
                origin = cluster.web_urls[self.web]
                with ws_connect(
                    url, additional_headers={"Cookie": self.chaos.cookie, "Origin": origin}, open_timeout=5
                ) as socket:
                    while not self.closed.is_set():
                        with contextlib.suppress(TimeoutError):
                            self.events.append((time.monotonic(), json.loads(socket.recv(timeout=0.5))))
            except Exception:
                if self.closed.is_set():
                    return
                self.reconnects += 1
                time.sleep(0.5)

    def hello_after(self, since: float, old_epochs: set[str]) -> float | None:
        for at, event in list(self.events):
            if (
                at >= since
                and event.get("type") == "hello"
                and event.get("hub_epoch") not in old_epochs | {"unavailable"}
            ):
                return at
        return None

    def epochs(self) -> set[str]:
        return {e.get("hub_epoch") for _, e in self.events if e.get("hub_epoch")}

    def finished_at(self, run_id: int) -> float | None:
        for at, event in list(self.events):
            if event.get("run_id") == run_id and event.get("type") in ("run.finished", "run.failed"):
                return at
        return None

    def close(self) -> None:
        self.closed.set()
        self._thread.join(3)


class Prober:
    """Polls one URL in a thread: status, content type and seconds of each answer; and `/healthz/ready`."""

    def __init__(self, chaos: Chaos, path: str, web: str = "web2", every: float = 0.1):
        self.chaos, self.path, self.web, self.every = chaos, path, web, every
        self.answers: list[tuple[int, str, float]] = []
        self.failing: set[str] = set()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._api, daemon=True),
            threading.Thread(target=self._ready, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _api(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                status, kind, _ = self.chaos._api_timed(self.web, "GET", self.path, timeout=15)
            except Exception:
                status, kind = 0, ""
            self.answers.append((status, kind, time.monotonic() - began))
            time.sleep(self.every)

    def _ready(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                status, _, body = self.chaos._api_timed(self.web, "GET", "/healthz/ready", timeout=5)
                if status != 200:
                    self.failing.update(json.loads(body).get("failing", []))
            time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(20)


# --- the faults ------------------------------------------------------------------------------------------------
def fault_worker_kill(chaos: Chaos) -> dict:
    lane = chaos.lanes[0]
    runs, missed = [], 0
    calls_before = chaos.provider_calls()
    prober = Prober(chaos, f"/api/workflows/{lane}/chat/")
    for _ in range(chaos.args.kills):
        run_id = chaos.send(lane, LONG)
        runs.append(run_id)
        if not chaos.wait_streaming(lane, run_id, timeout=60):
            missed += 1  # ended before we could kill it mid-step
        chaos.agent.kill(signal.SIGKILL)
        chaos.agent.process.wait(10)
        chaos.agent = chaos._worker("agent", queues="agent")
        chaos.wait_ended([(lane, run_id)], timeout=60)
    prober.stop()
    ledger = chaos.ledger(runs)
    calls = chaos.provider_calls() - calls_before
    return {
        "fault": f"agent worker SIGKILL mid-step x{len(runs)}",
        **ledger,
        "turns": len(runs),
        "5xx": sum(1 for s, _, _ in prober.answers if s >= 500),
        "pages_s": None,
        "extra_calls": max(0, calls - ledger["steps"]),
        "target": "0 lost/dup/stuck/double-billed (a killed step fails `interrupted`, never re-called)",
        "ok": ledger["lost"] == ledger["duplicated"] == ledger["stuck"] == ledger["double_billed"] == 0
        and calls <= ledger["steps"],
        "sees": f"failed runs by code {ledger['codes']}; provider calls {calls} for {ledger['steps']} steps; "
        f"/healthz/ready failing seen: {sorted(prober.failing) or 'none'}"
        + (f"; {missed} run(s) ended before the kill" if missed else ""),
    }


def fault_postgres_restart(chaos: Chaos) -> dict:
    lanes = chaos.lanes[: chaos.args.pg_turns]
    pairs = [(lane, chaos.send(lane, LONG)) for lane in lanes]
    for lane, run_id in pairs:
        chaos.wait_streaming(lane, run_id, timeout=30)
    prober = Prober(chaos, "/api/workflows/", every=0.05)
    time.sleep(0.5)
    down = chaos.restart_postgres(5.0)
    time.sleep(3)
    prober.stop()
    chaos.wait_ended(pairs, timeout=120)
    ledger = chaos.ledger([r for _, r in pairs])
    outage = [a for a in prober.answers if a[0] != 200]
    slow = [t for _, _, t in outage]
    not_json_503 = [a for a in outage if a[0] != 503 or "json" not in a[1]]
    p99 = percentile(slow, 0.99) if slow else 0.0
    return {
        "fault": f"PostgreSQL stopped {down:.0f} s during {len(pairs)} streaming answers",
        **ledger,
        "turns": len(pairs),
        "5xx": sum(1 for s, _, _ in prober.answers if s >= 500 and s != 503),
        "pages_s": None,
        "target": "every answer saved; API p99 <= 3 s, all JSON 503",
        "ok": ledger["answered"] == len(pairs)
        and ledger["stuck"] == ledger["lost"] == ledger["duplicated"] == 0
        and p99 <= 3.0
        and not not_json_503,
        "sees": f"API during the outage: {len(outage)} answers, p99 {p99:.2f} s, {len(not_json_503)} not JSON 503; "
        f"/healthz/ready failing seen: {sorted(prober.failing) or 'none'}; failed runs by code {ledger['codes']}",
    }


def fault_redis_restart_empty(chaos: Chaos) -> dict:
    pages = [chaos.page("web1" if i % 2 else "web2", lane) for i, lane in enumerate(chaos.lanes[: chaos.args.pages])]
    time.sleep(2)
    old_epochs = set().union(*(p.epochs() for p in pages))
    chaos.agent.stop()  # nothing takes the turns: they wait in the broker, which then forgets them
    lanes = chaos.lanes[: chaos.args.redis_turns]
    pairs = [(lane, chaos.send(lane, f"queued turn on lane {lane}")) for lane in lanes]
    prober = Prober(chaos, f"/api/workflows/{lanes[0]}/chat/")
    restarting = time.monotonic()
    chaos.cluster.restart_redis(empty=True)
    back = time.monotonic()
    chaos.agent = chaos._worker("agent", queues="agent")
    ready = time.monotonic()  # from here the queued turns can be answered
    ended = chaos.wait_ended(pairs, timeout=120)
    prober.stop()
    time.sleep(1)
    heard = [p.hello_after(restarting, old_epochs) for p in pages]
    heard = [None if h is None else max(0.0, h - back) for h in heard]
    right = []
    for page in pages:
        run_id = next(r for lane, r in pairs if lane == page.lane) if page.lane in lanes else None
        seen = page.finished_at(run_id) if run_id else page.hello_after(restarting, old_epochs)
        right.append(None if seen is None else max(0.0, seen - ready))
    reconnects = sum(p.reconnects for p in pages)
    for page in pages:
        page.close()
    ledger = chaos.ledger([r for _, r in pairs])
    deaf = sum(1 for h in heard if h is None)
    pages_s = max((r for r in right if r is not None), default=None)
    return {
        "fault": f"Redis restarted empty, {len(pairs)} turns queued, {len(pages)} pages open",
        **ledger,
        "turns": len(pairs),
        "5xx": sum(1 for s, _, _ in prober.answers if s >= 500 and s != 503),
        "pages_s": pages_s,
        "target": "every queued turn answered; pages hear again and show the answer <= 10 s, no reload",
        "ok": ledger["answered"] == len(pairs)
        and ledger["stuck"] == ledger["lost"] == ledger["duplicated"] == 0
        and deaf == 0
        and all(r is not None and r <= 10 for r in right)
        and max(h for h in heard if h is not None) <= 10,
        "sees": f"pages heard the new epoch {max((h for h in heard if h is not None), default=float('nan')):.1f} s "
        f"after Redis was back (deaf: {deaf}, reconnect attempts: {reconnects}); each page saw its turn end <= "
        f"{pages_s if pages_s is None else round(pages_s, 1)} s after the agent worker was up again "
        f"(its start took {ready - back:.0f} s); {len(ended)}/{len(pairs)} ended; "
        f"/healthz/ready failing seen: {sorted(prober.failing) or 'none'}; failed runs by code {ledger['codes']}",
    }


def fault_web_kill(chaos: Chaos) -> dict:
    lane = chaos.lanes[1]
    runs, times = [], []
    for _ in range(chaos.args.web_kills):
        page = chaos.page("web1", lane)
        time.sleep(1.5)
        run_id = chaos.send(lane, LONG, web="web1")
        runs.append(run_id)
        chaos.wait_streaming(lane, run_id, timeout=30)
        chaos.cluster.processes["web1"].kill(signal.SIGKILL)
        killed = time.monotonic()
        page.web = "web2"  # the load balancer sends the page's reconnect to the web process left
        ended = chaos.wait_ended([(lane, run_id)], timeout=60)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and page.finished_at(run_id) is None:
            time.sleep(0.1)
        seen = page.finished_at(run_id)
        if seen is None and ended:  # the page reconnected after the end: its hello refetch shows the answer
            seen = next((at for at, e in page.events if at > killed and e.get("type") == "hello"), None)
        times.append(None if seen is None else seen - killed)
        page.close()
        chaos.cluster.start_web("web1")
    ledger = chaos.ledger(runs)
    ok_times = [t for t in times if t is not None]
    return {
        "fault": f"web process SIGKILLed mid-stream x{len(runs)}",
        **ledger,
        "turns": len(runs),
        "5xx": 0,
        "pages_s": max(ok_times) if ok_times else None,
        "target": "every answer saved; the page right <= 10 s after reconnecting",
        "ok": ledger["answered"] == len(runs)
        and ledger["stuck"] == ledger["lost"] == ledger["duplicated"] == 0
        and len(ok_times) == len(runs)
        and max(ok_times) <= 10,
        "sees": "the page's socket closes (1006) and reconnects to the other web process; the run finishes in the "
        f"worker regardless; page right after {', '.join(f'{t:.1f} s' if t is not None else 'never' for t in times)}",
    }


def garbage_requests(rng: random.Random, lane: int, count: int):
    ids = ["abc", "-1", "0", "99999999999999999999", "%00", "1.5", "null", "..%2F..", "%F0%9F%99%82", "a%20b"]
    paths = [
        "/api/workflows/{i}/",
        "/api/workflows/{i}/chat/",
        "/api/workflows/{i}/chat/runs/{i}/",
        "/api/workflows/<lane>/chat/messages/{i}/edit/",
        "/api/workflows/<lane>/memory/{i}/items/",
        "/api/workflows/<lane>/memory/{i}/items/{i}/",
        "/api/workflows/<lane>/runs/{i}/",
        "/api/nothing/{i}/",
        "/api/workflows/<lane>/chat/messages/",
        "/api/workflows/",
        "/api/workflows/import/",
    ]
    bodies = [
        b"{not json",
        b'{"text": 123}',
        b'{"text": ""}',
        b'{"nodes": "x", "edges": 5}',
        b'{"graph": {"nodes": [{"id": 1}], "edges": null}}',
        b'{"text": "nul \\u0000 here"}',
        json.dumps({"text": "x" * 300_000}).encode(),
        b"[" * 5000 + b"]" * 5000,
        b"\xff\xfe\x00garbage",
        b'{"expected_version": "one", "limit": -5}',
    ]
    for _ in range(count):
        path = rng.choice(paths).replace("<lane>", str(lane))
        path = path.replace("{i}", rng.choice(ids), 1).replace("{i}", rng.choice(ids))
        method = rng.choice(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
        body = rng.choice(bodies) if method in ("POST", "PUT", "PATCH") else None
        yield method, path, body, rng.choice(["application/json", "text/plain", "application/x-www-form-urlencoded"])


def fault_garbage(chaos: Chaos) -> dict:
    rng = random.Random(20)
    fivexx, not_json, sent = 0, 0, 0
    failures: list[str] = []
    base = chaos.cluster.web_urls["web2"]
    for method, path, body, kind in garbage_requests(rng, chaos.lanes[0], chaos.args.garbage):
        request = urllib.request.Request(
            base + path,
            method=method,
            data=body,
            headers={"Authorization": f"Token {chaos.cluster.token}", "Content-Type": kind},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, content_type = response.status, response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as error:
            status, content_type = error.code, error.headers.get("Content-Type", "")
        except Exception:
            status, content_type = 0, ""
        sent += 1
        fivexx += status >= 500 or status == 0
        not_json += status >= 400 and "json" not in content_type
        if status >= 500 or status == 0 or (status >= 400 and "json" not in content_type):
            failures.append(f"{method} {path} -> {status} {content_type or '-'}")
    return {
        "fault": f"{sent} garbage API requests",
        "turns": 0,
        "answered": 0,
        "failed": 0,
        "lost": 0,
        "duplicated": 0,
        "stuck": 0,
        "double_billed": 0,
        "5xx": fivexx,
        "pages_s": None,
        "target": "0 5xx, every error JSON",
        "ok": fivexx == 0 and not_json == 0,
        "sees": f"{not_json} error answers not JSON; 4xx in the one error shape"
        + (f"; failures: {sorted(set(failures))[:8]}" if failures else ""),
    }


FAULTS = {
    "kill": fault_worker_kill,
    "pg": fault_postgres_restart,
    "redis": fault_redis_restart_empty,
    "web": fault_web_kill,
    "garbage": fault_garbage,
}


def print_table(rows: list[dict]) -> None:
    head = ["fault", "turns", "answered", "failed", "lost", "dup", "stuck", "2x billed", "5xx", "pages ok", "verdict"]
    lines = []
    for row in rows:
        pages = "-" if row.get("pages_s") is None else f"{row['pages_s']:.1f} s"
        lines.append(
            [
                row["fault"],
                *(str(row.get(k, "-")) for k in ("turns", "answered", "failed", "lost", "duplicated", "stuck")),
                str(row.get("double_billed", "-")),
                str(row.get("5xx", "-")),
                pages,
                "PASS" if row.get("ok") else "FAIL",
            ]
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |")
    print()
    for row in rows:
        print(f"- {row['fault']}: target {row['target']}. Operator sees: {row['sees']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5, help="agent worker SIGKILLs mid-step (issue: 20)")
    parser.add_argument("--pg-turns", type=int, default=8, help="answers streaming while PostgreSQL is down (20)")
    parser.add_argument("--redis-turns", type=int, default=10, help="turns queued when Redis loses its data (50)")
    parser.add_argument("--pages", type=int, default=5, help="open pages across the Redis restart")
    parser.add_argument("--web-kills", type=int, default=2, help="web processes SIGKILLed mid-stream")
    parser.add_argument("--garbage", type=int, default=300, help="malformed API requests")
    parser.add_argument("--delay-ms", type=int, default=60, help="offline provider: ms between streamed pieces")
    parser.add_argument("--only", default=",".join(FAULTS), help="comma-separated faults to run, in this order")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="oc-chaos-"))
    root.chmod(0o755)  # the embedded PostgreSQL runs as another user and must reach its folder
    began = time.monotonic()
    rows: list[dict] = []
    chaos = None
    try:
        chaos = Chaos(root, args)
        print(f"stack up in {time.monotonic() - began:.0f} s ({len(chaos.lanes)} chat lanes)", flush=True)
        for name in args.only.split(","):
            started = time.monotonic()
            try:
                row = FAULTS[name](chaos)
            except Exception as error:  # a fault that broke the bench is a FAIL row, not a lost table
                row = {"fault": name, "ok": False, "target": "-", "sees": f"bench error: {error!r}"}
            rows.append(row)
            print(f"{name}: {time.monotonic() - started:.0f} s, {'PASS' if row.get('ok') else 'FAIL'}", flush=True)
    finally:
        if chaos is not None:
            with contextlib.suppress(Exception):
                chaos.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nchaos: {time.monotonic() - began:.0f} s in all (cpu count {os.cpu_count()})\n")
    print_table(rows)
    return 0 if rows and all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
