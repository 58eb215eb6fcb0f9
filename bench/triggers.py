#!/usr/bin/env python
"""What the triggers cost (docs/triggers.md).

  * the sweep: one `schedules_sweep` transaction with 10,000 running schedules of which 100 are due (claim them
    SKIP LOCKED, move each forward, record 100 fires), p50/p95 over repeated sweeps (the due rows are made due
    again between sweeps; target p95 <= 20 ms). The fires' delivery tasks are not sent (their cost is the chat's);
  * webhook intake to firing start: `POST /hooks/<id>/` through Django's request handling to the 202, which
    comes after the chat run and its firing were admitted (`firing_start`), one delivery per workflow so no lane is
    busy; p50/p95 (target p50 <= 10 ms at zero provider delay). The firing's first task is kept, not sent, so no
    worker and no provider time is in the figure. Measured twice: to workflows whose chat session exists (every
    delivery after a workflow's first turn: the target) and to fresh ones (the delivery makes the session).

Each figure comes with this process's CPU time (the rest is waiting: for PostgreSQL, Redis, and on a shared machine
for a core) and the number of SQL statements one sweep or delivery sends.

Runs against the embedded services (or DATABASE_URL/REDIS_URL), removes the rows it made, and prints the 1-minute
load average before and after (the machine is shared; figures mean little without it). Usage:

    .venv/bin/python bench/triggers.py [--schedules 10000] [--due 100] [--sweeps 30] [--deliveries 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("ALLOWED_HOSTS", "localhost")  # the deliveries go through the request handling
if not os.environ.get("SECRET_KEY"):
    import secrets

    os.environ["SECRET_KEY"] = secrets.token_urlsafe(48)

import django  # noqa: E402
from figures import percentile  # noqa: E402  (bench/, the script's own folder)

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

import triggers.services  # noqa: E402
from chat.services.runs import chat_session_get  # noqa: E402
from opencompany.celery import app  # noqa: E402
from triggers.models import Schedule, TriggerFire  # noqa: E402
from triggers.webhooks import webhook_address_issue  # noqa: E402
from workflows.services import workflow_create, workflow_start  # noqa: E402


def _workflow(owner, nodes_extra: list[dict], edges_extra: list[dict], name: str):
    agent = {
        "id": "lead",
        "type": "agent",
        "params": {"name": "Lead", "provider": "offline", "model": "offline-echo", "system_prompt": ""},
    }
    nodes = [{"id": "trigger", "type": "chatTrigger", "params": {}}, agent, *nodes_extra]
    edges = [
        {"source": "trigger", "sourceHandle": "output-main", "target": "lead", "targetHandle": "input-main"},
        *edges_extra,
    ]
    outcome = workflow_create(owner=owner, name=name, graph={"nodes": nodes, "edges": edges})
    workflow_start(workflow=outcome.workflow)
    outcome.workflow.refresh_from_db()
    return outcome.workflow, outcome.aliases


def _statements(fn) -> int:
    """How many SQL statements `fn` sends (one untimed run)."""
    with CaptureQueriesContext(connection) as captured:
        fn()
    return len(captured.captured_queries)


def bench_sweep(owner, *, schedules: int, due: int, sweeps: int) -> tuple[list[float], list[float], int]:
    """(wall seconds, this process's CPU seconds, SQL statements) of each sweep."""
    workflow, _ = _workflow(owner, [], [], "bench sweep")
    now = timezone.now()
    far = now + timedelta(days=1)
    rows = [
        Schedule(
            workflow=workflow,
            node_id=f"s{i}",
            generation=workflow.live_generation,
            name=f"s{i}",
            every_minutes=5,
            timezone="UTC",
            message="tick {time}",
            anchor_at=now - timedelta(minutes=5),
            next_due_at=now if i < due else far,
        )
        for i in range(schedules)
    ]
    Schedule.objects.bulk_create(rows, batch_size=2000)
    due_ids = list(Schedule.objects.filter(workflow=workflow, next_due_at=now).values_list("pk", flat=True))
    triggers.services.enqueue_task = lambda *args, **kwargs: None  # delivery is the chat's cost, not the sweep's

    def make_due_again():
        Schedule.objects.filter(pk__in=due_ids).update(next_due_at=now)
        TriggerFire.objects.filter(schedule_id__in=due_ids).delete()

    timings, cpu = [], []
    for _ in range(sweeps):
        make_due_again()
        started, started_cpu = time.perf_counter(), time.process_time()
        result = triggers.services.schedules_sweep(now=now, limit=500)
        timings.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        assert len(result.fired) == due, (len(result.fired), due)
    make_due_again()
    statements = _statements(lambda: triggers.services.schedules_sweep(now=now, limit=500))
    return timings, cpu, statements


def bench_webhooks(owner, *, deliveries: int, with_session: bool) -> tuple[list[float], list[float], int]:
    """(wall seconds, this process's CPU seconds, SQL statements) of each delivery. `with_session`: the
    workflow's chat session exists (as after its first turn); else the delivery makes it."""
    sent: list = []
    app.send_task = lambda name, args=None, **options: sent.append(name)  # keep the firings' first tasks
    settings.TRIGGERS_WEBHOOK_RATE_PER_MINUTE = 10**6
    paths = []
    for i in range(deliveries + 1):
        hook = {"id": "hook", "type": "webhookTrigger", "params": {"name": "bench", "message": "{body.title}"}}
        edge = {"source": "hook", "sourceHandle": "output-main", "target": "lead", "targetHandle": "input-main"}
        workflow, aliases = _workflow(owner, [hook], [edge], f"bench hook {i}")
        _, token = webhook_address_issue(workflow=workflow, node_id=aliases.get("hook", "hook"))
        paths.append(f"/hooks/{token}/")
        if with_session:
            chat_session_get(workflow=workflow)
    client = Client(HTTP_HOST="localhost")
    body = json.dumps({"title": "bench delivery"})

    def deliver(path):
        response = client.post(path, body, content_type="application/json", secure=True)  # DEBUG off wants HTTPS
        assert response.status_code == 202 and response.json()["state"] == "fired", (
            response.status_code,
            response.headers,
            response.content,
        )

    statements = _statements(lambda: deliver(paths[0]))  # untimed: it also warms the process up
    timings, cpu = [], []
    for path in paths[1:]:
        started, started_cpu = time.perf_counter(), time.process_time()
        deliver(path)
        timings.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    assert sent.count("agent.prepare_payload") >= deliveries, sent[:3]
    return timings, cpu, statements


def _figures(label: str, wall: list[float], cpu: list[float], statements: int, target: str) -> None:
    ms = 1000.0
    print(label)
    print(
        f"  p50 {percentile(wall, 0.5) * ms:.1f} ms, p95 {percentile(wall, 0.95) * ms:.1f} ms ({target}); "
        f"this process's CPU p50 {percentile(cpu, 0.5) * ms:.1f} ms; {statements} SQL statements"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--due", type=int, default=100)
    parser.add_argument("--sweeps", type=int, default=30)
    parser.add_argument("--deliveries", type=int, default=100)
    args = parser.parse_args()
    owner = get_user_model().objects.create_user(username=f"bench-triggers-{os.getpid()}-{int(time.time())}")
    load_before = os.getloadavg()[0]
    try:
        sweep = bench_sweep(owner, schedules=args.schedules, due=args.due, sweeps=args.sweeps)
        later = bench_webhooks(owner, deliveries=args.deliveries, with_session=True)
        first = bench_webhooks(owner, deliveries=args.deliveries, with_session=False)
        _figures(
            f"sweep, {args.schedules} schedules of which {args.due} due, {args.sweeps} sweeps:",
            *sweep,
            "target p95 <= 20",
        )
        _figures(
            f"webhook intake to firing start (202), {args.deliveries} deliveries, the chat session exists:",
            *later,
            "target p50 <= 10",
        )
        _figures(
            f"  the same, each the workflow's first turn (the delivery makes its chat session), {args.deliveries}:",
            *first,
            "once per workflow",
        )
        print(
            f"load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} CPUs"
        )
    finally:
        owner.delete()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
