#!/usr/bin/env python
"""What a turn costs the runtime itself: broker hops, database writes, the worker's bookkeeping.

With the offline provider at zero delay (so the provider call is ~free), measures

  * latency from `firing_start` to the persisted turn (Firing.created_at -> finished_at, stamped on the row by the
    firing process and by the worker, one machine's clock), p50/p95 over N sequential turns spread over 10
    conversations;
  * where the p50 goes: the broker hop and prepare, the claim, the provider call with the answer's save, persist
    (by the firing's and step's own timestamps, read after each turn);
  * throughput: turns per second with 1, 4 and 16 conversations driven concurrently (each conversation fires
    its next turn as soon as the previous one is persisted).

`bench/turn_profile.py` runs the worker's part of a turn in one process and prints its statements, CPU time and
Python calls, which move much less with the machine's load than these figures.

A turn is one broker hop (`firing_start` sends `agent.prepare_payload`; the worker that receives it continues with
execute and persist in the same process, see docs/architecture.md "A firing") and four commits in the worker:
prepare, the step claim, the answer, persist.

The driver learns of ended turns from PostgreSQL (LISTEN/NOTIFY, through a trigger the run adds and removes; see
`TurnEnds`) instead of polling, and the figures use the rows' own timestamps. It runs against the
embedded services (or DATABASE_URL/REDIS_URL), starts its own Celery worker process (prefork, `--concurrency`
processes, like `dev.py run`), removes the rows it made, and prints the 1-minute load average before and after
(the machine is shared; figures mean little without it). Usage:

    .venv/bin/python bench/turn_overhead.py [--turns 200] [--concurrency 4] [--per-conversation 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
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
from processes import stop_process  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402

from agents.models import Firing, LlmStep  # noqa: E402
from agents.services.firings import firing_start  # noqa: E402
from workflows.services import workflow_create, workflow_start  # noqa: E402


def make_workflow(owner, index: int):
    graph = {
        "nodes": [
            {"id": "t", "type": "chatTrigger", "params": {}},
            {
                "id": "a",
                "type": "agent",
                "params": {
                    "name": "Bench",
                    "provider": "offline",
                    "model": "offline-echo",
                    "system_prompt": "Be brief.",
                },
            },
            {"id": "c", "type": "context", "params": {}},
        ],
        "edges": [
            {"source": "t", "sourceHandle": "output-main", "target": "a", "targetHandle": "input-main"},
            {"source": "c", "sourceHandle": "output-context", "target": "a", "targetHandle": "input-context"},
        ],
    }
    outcome = workflow_create(owner=owner, name=f"bench {index}", graph=graph)
    generation, _ = workflow_start(workflow=outcome.workflow)
    return outcome.workflow, generation.number, outcome.aliases["a"]


class TurnEnds:
    """Each firing's end as it commits, told by PostgreSQL (LISTEN/NOTIFY), so the driver waits without polling.

    For the run, a trigger on the firing table (`bench_turn_overhead_ended`, dropped at the end) notifies the
    firing's id when an UPDATE moves it to a terminal state; the notification is delivered when that transaction
    commits, i.e. when the turn is persisted. Polling for ends instead (a query every 2 ms) took CPU and database
    time from the 2-core machine the turns ran on. The trigger adds one NOTIFY to each turn's last transaction."""

    CHANNEL = "bench_turn_overhead_ended"

    def __init__(self):
        import psycopg

        self.connection = psycopg.connect(settings.DATABASE_URL, autocommit=True)
        terminal = ", ".join(f"'{state}'" for state in Firing.TERMINAL_STATES)
        table = Firing._meta.db_table
        self.connection.execute(
            f"CREATE OR REPLACE FUNCTION {self.CHANNEL}() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN PERFORM pg_notify('{self.CHANNEL}', NEW.id::text); RETURN NULL; END $$"
        )
        self.connection.execute(f"DROP TRIGGER IF EXISTS {self.CHANNEL} ON {table}")
        self.connection.execute(
            f"CREATE TRIGGER {self.CHANNEL} AFTER UPDATE OF state ON {table} FOR EACH ROW "
            f"WHEN (NEW.state IN ({terminal}) AND OLD.state IS DISTINCT FROM NEW.state) "
            f"EXECUTE FUNCTION {self.CHANNEL}()"
        )
        self.connection.execute(f"LISTEN {self.CHANNEL}")
        self.ended: set[str] = set()

    def wait(self, timeout: float = 60) -> set[str]:
        """Ids of firings that ended since the last call, waiting for at least one."""
        if not self.ended:
            for notify in self.connection.notifies(timeout=timeout, stop_after=1):
                self.ended.add(notify.payload)
            if not self.ended:
                raise TimeoutError("no turn ended in time")
        for notify in self.connection.notifies(timeout=0):  # the ones that came with it
            self.ended.add(notify.payload)
        ended, self.ended = self.ended, set()
        return ended

    def close(self) -> None:
        self.connection.execute(f"DROP TRIGGER IF EXISTS {self.CHANNEL} ON {Firing._meta.db_table}")
        self.connection.execute(f"DROP FUNCTION IF EXISTS {self.CHANNEL}()")
        self.connection.close()


def finished(firing_ids) -> list[Firing]:
    rows = list(Firing.objects.filter(pk__in=list(firing_ids)).only("state", "created_at", "finished_at", "error_code"))
    for firing in rows:
        if firing.state != Firing.State.FINISHED:
            raise RuntimeError(f"firing ended {firing.state} ({firing.error_code})")
    return rows


def wait_finished(ends: TurnEnds, firing_id, timeout: float = 60) -> Firing:
    wanted = str(firing_id)
    deadline = time.monotonic() + timeout
    while wanted not in ends.wait(timeout=max(deadline - time.monotonic(), 0.001)):
        pass  # an earlier turn's end (the warm-up's): not this one
    return finished([firing_id])[0]


def start_worker(concurrency: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": settings.DATABASE_URL,
        "REDIS_URL": settings.REDIS_URL,
        "OFFLINE_PROVIDER_DELAY_MS": "0",
        "LOG_LEVEL": "WARNING",
    }
    args = [sys.executable, "-m", "celery", "-A", "opencompany", "worker", "-Q", "agent", "-c", str(concurrency)]
    args += [
        "--loglevel",
        os.environ.get("BENCH_WORKER_LOGLEVEL", "WARNING"),
        "--without-mingle",
        "--without-gossip",
        "-n",
        f"bench{os.getpid()}@%h",
    ]
    process = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env,
        stdout=open(os.environ.get("BENCH_WORKER_LOG", os.devnull), "w"),  # noqa: SIM115 (lives with the worker)
        stderr=subprocess.STDOUT,
    )
    return process


def latency(ends: TurnEnds, conversations, turns: int, phases: dict[str, list[float]]) -> list[float]:
    """p50 samples; `phases` gets where each turn's time went, by the rows' own timestamps (read after the turn)."""
    samples = []
    for i in range(turns):
        workflow, generation, agent = conversations[i % len(conversations)]
        firing = wait_finished(
            ends,
            firing_start(
                workflow=workflow, generation=generation, agent_node_id=agent, prompt=f"turn {i}: how are you?"
            ),
        )
        samples.append((firing.finished_at - firing.created_at).total_seconds() * 1000)
        step = LlmStep.objects.filter(firing_id=firing.pk, iteration=1).values("started_at", "finished_at").first()
        started = Firing.objects.filter(pk=firing.pk).values_list("started_at", flat=True).first()
        if step and started:
            marks = [firing.created_at, started, step["started_at"], step["finished_at"], firing.finished_at]
            for name, (a, b) in zip(PHASES, zip(marks, marks[1:], strict=False), strict=True):
                phases.setdefault(name, []).append((b - a).total_seconds() * 1000)
    return samples


PHASES = (
    "firing_start -> prepared (broker hop, task start, prepare's lock, lease, load, seed)",
    "-> step 1 claimed (prepare's write and commit, the claim)",
    "-> answer saved (budget check, request, provider call, answer UPDATE)",
    "-> firing finished (persist: lock, bill, append, pressure, end)",
)


def throughput(ends: TurnEnds, conversations, per_conversation: int) -> float:
    """Turns per second between the first fire and the last persisted turn, by the rows' own timestamps.

    One driver fires each conversation's next turn as soon as PostgreSQL tells it the previous one was persisted
    (`TurnEnds`); the clock is the rows' own timestamps."""
    remaining = {index: per_conversation for index in range(len(conversations))}
    open_turns = {}  # firing id (text) -> conversation index
    bounds = []

    def fire(index):
        workflow, generation, agent = conversations[index]
        remaining[index] -= 1
        open_turns[
            str(
                firing_start(
                    workflow=workflow,
                    generation=generation,
                    agent_node_id=agent,
                    prompt=f"load turn {remaining[index]}",
                )
            )
        ] = index

    for index in remaining:
        fire(index)
    deadline = time.monotonic() + 120
    while open_turns:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(open_turns)} turns did not finish")
        ended = [firing_id for firing_id in ends.wait(timeout=deadline - time.monotonic()) if firing_id in open_turns]
        for done in finished(ended):
            bounds.append((done.created_at, done.finished_at))
            index = open_turns.pop(str(done.pk))
            if remaining[index]:
                fire(index)
    elapsed = (max(end for _, end in bounds) - min(start for start, _ in bounds)).total_seconds()
    return len(bounds) / elapsed


def _listening_process_tree(port: int) -> list:
    """The process listening on `port` on this machine and its children (none when the server is elsewhere)."""
    import psutil

    for connection in psutil.net_connections(kind="tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port and connection.pid:
            server = psutil.Process(connection.pid)
            return [server, *server.children(recursive=True)]
    return []


def cpu_seconds_by_role(worker: subprocess.Popen) -> dict[str, float]:
    """CPU time used so far (user + system) by each kind of process a turn runs in: the Celery worker (its main
    process and pool children), the database server's processes and the broker's (when they run on this machine),
    and this driver, which starts the firings and reads their ends."""
    from urllib.parse import urlsplit

    import psutil

    worker_process = psutil.Process(worker.pid)
    groups = {
        "worker": [worker_process, *worker_process.children(recursive=True)],
        "database": _listening_process_tree(int(settings.DATABASES["default"]["PORT"] or 5432)),
        "broker": _listening_process_tree(urlsplit(settings.CELERY_BROKER_URL).port or 6379),
        "driver": [psutil.Process()],
    }
    totals = {}
    for role, processes in groups.items():
        totals[role] = 0.0
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue  # a backend that ended meanwhile: its time is not counted
            totals[role] += times.user + times.system
    return totals


def floor(samples: int = 200) -> list[float]:
    """What a turn cannot cost less than: four commits of a trivial row update (a turn commits prepare, the step
    claim, the answer and persist) and one broker hop (a message through the broker's Redis, published and
    consumed), timed in this process. The ratio of the turn's p50 to this is the runtime's own overhead."""
    from django.db import connection, transaction
    from kombu import Connection

    timings = []
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, n int)")
        cursor.execute("INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING")
    with Connection(settings.CELERY_BROKER_URL) as broker:
        queue = broker.SimpleQueue(f"bench-floor-{os.getpid()}")
        try:
            for _ in range(samples):
                started = time.perf_counter()
                for _ in range(4):
                    with transaction.atomic(), connection.cursor() as cursor:
                        cursor.execute("UPDATE bench_floor SET n = n + 1 WHERE id = 1")
                queue.put({"hop": 1})
                queue.get(block=True, timeout=5).ack()
                timings.append((time.perf_counter() - started) * 1000)
        finally:
            queue.clear()
            queue.close()
    return timings


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4, help="worker processes")
    parser.add_argument("--per-conversation", type=int, default=15)
    args = parser.parse_args()
    settings.AGENT_EXECUTION_MODE = "celery"

    owner = get_user_model().objects.create_user(username=f"bench-{os.getpid()}-{int(time.time())}")
    load_before = os.getloadavg()[0]  # the machine is shared: quote figures with the load they were taken under
    worker = start_worker(args.concurrency)
    ends = TurnEnds()
    try:
        conversations = [make_workflow(owner, i) for i in range(16)]
        # Warm up: worker pool processes import and connect on their first tasks.
        for workflow, generation, agent in conversations[:4]:
            firing_id = firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt="warm up")
            wait_finished(ends, firing_id, timeout=120)
        phases: dict[str, list[float]] = {}
        samples = latency(ends, conversations[:10], args.turns, phases)
        floor_samples = floor()
        print(f"turn overhead, offline provider at zero delay, worker concurrency {args.concurrency}")
        p50, floor_p50 = statistics.median(samples), statistics.median(floor_samples)
        print(
            f"  firing_start -> persisted turn over {len(samples)} turns: "
            f"p50 {p50:.1f} ms  p95 {percentile(samples, 0.95):.1f} ms  max {max(samples):.1f} ms"
        )
        for name in PHASES:
            print(f"    p50 {statistics.median(phases[name]):5.1f} ms  {name}")
        print(f"  floor (4 trivial commits + 1 broker hop, this process): p50 {floor_p50:.1f} ms -> turn p50 is "
              f"{p50 / floor_p50:.1f}x the floor")  # fmt: skip
        rates = {}
        for count in (1, 4, 16):
            cpu_before = cpu_seconds_by_role(worker)
            rates[count] = throughput(ends, conversations[:count], args.per_conversation)
            cpu_after = cpu_seconds_by_role(worker)
            turns = count * args.per_conversation
            spent = "  ".join(
                f"{role} {(cpu_after[role] - cpu_before[role]) * 1000 / turns:.1f}" for role in cpu_before
            )
            print(f"  {count:>2} concurrent conversations: {rates[count]:.1f} turns/s  (CPU ms a turn: {spent})")
        print(f"  target: p50 <= 6 ms and <= 3x the floor: {'met' if p50 <= 6 and p50 <= 3 * floor_p50 else 'NOT met'}")
        print(f"  target: >= 150 turns/s with 16 conversations: {'met' if rates[16] >= 150 else 'NOT met'}")
        print(f"  load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    finally:
        ends.close()
        stop_process(worker)
        owner.delete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
