#!/usr/bin/env python
"""What one turn costs the worker process itself, without a broker or a second process: statements and CPU.

Runs the worker's path for a turn in this process (`agent.prepare_payload` as a delivered task, continuing with
execute and persist in-process, like `agents/tasks.py` does), with the offline provider at zero delay and the same
agent as `bench/turn_overhead.py` (a Context, no tools), over 10 conversations in turn like its latency part.
Prints, per turn:

  * the SQL statements the worker sends (counted with Django's CaptureQueriesContext, in a separate pass so
    counting does not weigh on the timings), each with `--sql`,
  * CPU milliseconds in this process (time.process_time) and wall milliseconds,
  * Python function calls (under cProfile; unlike time, it does not move with the machine's load),

and, with `--profile`, the top functions under cProfile timed by CPU (firing_start included). Less noisy than the
end-to-end bench on a shared machine (CPU time excludes waiting for the database). Usage:

    .venv/bin/python bench/turn_profile.py [--turns 200] [--profile] [--sql]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("DEBUG", "0")
os.environ["OFFLINE_PROVIDER_DELAY_MS"] = "0"
if not os.environ.get("SECRET_KEY"):
    import secrets

    os.environ["SECRET_KEY"] = secrets.token_urlsafe(48)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from agents import dispatch  # noqa: E402
from agents.models import Firing  # noqa: E402
from agents.services.firings import firing_start  # noqa: E402
from opencompany.celery import connections_at_task_end, connections_at_task_start  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from turn_overhead import make_workflow  # noqa: E402

_sent: list[tuple[str, tuple]] = []


def one_turn(conversation, text: str):
    """firing_start as the bench's driver does, then the delivered task as a prefork worker child runs it."""
    _sent.clear()
    workflow, generation, agent = conversation
    firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=text)
    (name, args), *rest = _sent
    assert name == "agent.prepare_payload" and not rest, _sent
    _sent.clear()
    c0, w0 = time.process_time(), time.perf_counter()
    connections_at_task_start()  # task_prerun
    with dispatch.running_steps():
        dispatch.step_function(name)(*args)
    connections_at_task_end()  # task_postrun
    cpu, wall = (time.process_time() - c0) * 1000, (time.perf_counter() - w0) * 1000
    assert not _sent, _sent
    return cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="print the top functions under cProfile")
    parser.add_argument("--sql", action="store_true", help="print one turn's statements")
    args = parser.parse_args()
    settings.AGENT_EXECUTION_MODE = "celery"
    dispatch._send = lambda name, a, countdown=None: _sent.append((name, tuple(a)))

    owner = get_user_model().objects.create_user(username=f"profile-{os.getpid()}-{int(time.time())}")
    try:
        conversations = [make_workflow(owner, i) for i in range(10)]
        conversation = conversations[0]
        for i, warm in enumerate(conversations):  # warm up: imports, caches, the pool
            one_turn(warm, f"warm up {i}")

        with CaptureQueriesContext(connection) as counted:
            start = len(counted.captured_queries)
            _sent.clear()
            firing_id = firing_start(
                workflow=conversation[0],
                generation=conversation[1],
                agent_node_id=conversation[2],
                prompt="counted turn",
            )
            in_start = len(counted.captured_queries) - start
            (name, task_args), *_ = _sent
            _sent.clear()
            before = len(counted.captured_queries)
            connections_at_task_start()
            with dispatch.running_steps():
                dispatch.step_function(name)(*task_args)
            connections_at_task_end()
            in_worker = counted.captured_queries[before:]
        assert Firing.objects.get(pk=firing_id).state == Firing.State.FINISHED
        print(f"statements: firing_start {in_start}, worker {len(in_worker)}")
        if args.sql:
            for query in in_worker:
                print(f"  {query['time']}s  {query['sql'][:220]}")

        cpu, wall = [], []
        for i in range(args.turns):
            turn_cpu, turn_wall = one_turn(conversations[i % 10], f"turn {i}: how are you?")
            cpu.append(turn_cpu)
            wall.append(turn_wall)
        print(
            f"the worker's part of a turn over {args.turns} turns (the task and its continuations): "
            f"CPU p50 {statistics.median(cpu):.2f} ms, wall p50 {statistics.median(wall):.2f} ms"
        )
        import cProfile
        import pstats

        counter = cProfile.Profile()
        counter.enable()
        for i in range(20):
            one_turn(conversations[i % 10], f"counted calls {i}")
        counter.disable()
        calls = pstats.Stats(counter).total_calls / 20
        print(f"Python function calls per turn (worker + firing_start, steadier than time): {calls:,.0f}")
        if args.profile:
            profiler = cProfile.Profile(time.process_time)  # CPU, not waiting for the database
            profiler.enable()
            for i in range(args.turns):
                one_turn(conversations[i % 10], f"profiled turn {i}")
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(60)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
        print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    finally:
        owner.delete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
