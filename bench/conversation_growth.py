#!/usr/bin/env python
"""Does a turn cost the same at message 1,000 as at message 10? One long conversation through the real worker.

One agent with a Context and a Memory, the offline provider at zero delay, a real Celery worker (prefork, like
`dev.py run`). The bench sends N turns (default 250) one after another into the same conversation; every fourth
turn asks the agent to remember something (a `memory` tool call: call, result, answer), the others are plain
messages of ~1.6 KB that the offline agent echoes, so a turn adds ~3.3 KB to the stored conversation.

It prints:
  * the time of a turn (Firing.created_at -> finished_at, the rows' own timestamps) around turns 10, 50, 100 and
    250: the median of the 9 turns centred on each;
  * the bytes every table grew by (pg_total_relation_size, indexes and TOAST included) after the run, and what the
    stored conversation itself holds;
  * the verdicts: turn 250 within 1.3x of turn 10; total growth <= 5 MB; growth linear in the turns (the second
    half of the run grows the database by no more than 1.5x the first half: a copy of the conversation per
    firing would make it ~3x). The measured tables are VACUUM FULLed first, so free space that earlier runs'
    deleted rows left behind does not absorb the first half (--keep-free-space skips that).

Compaction would cut the conversation down whenever it nears the model's window and hide the growth this measures,
so the worker reads a catalogue in which the offline model's window is 10 million tokens
(PROVIDER_CATALOGUE_PATH). The stored conversation stays under the 1 MB seed cap at 250 turns. Usage:

    .venv/bin/python bench/conversation_growth.py [--turns 250] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# Figures are for the production setting: DEBUG keeps every query's SQL in memory and costs time per statement.
os.environ.setdefault("DEBUG", "0")
if not os.environ.get("SECRET_KEY"):  # production settings need one; this run's rows are its own
    import secrets

    os.environ["SECRET_KEY"] = secrets.token_urlsafe(48)

import django  # noqa: E402
from processes import stop_process  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from turn_overhead import TurnEnds, start_worker, wait_finished  # noqa: E402  (bench/, the script's own folder)

from agents.services.firings import firing_start  # noqa: E402
from conversations.models import AgentConversation  # noqa: E402
from providers.catalogue import CATALOGUE_PATH  # noqa: E402
from workflows.services import workflow_create, workflow_start  # noqa: E402

TABLES_LIKE = ("agents\\_%", "conversations\\_%", "memory\\_%", "chat\\_%", "workflows\\_%")


def table_sizes() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relkind = 'r' AND ("
            + " OR ".join(["relname LIKE %s"] * len(TABLES_LIKE))
            + ")",
            list(TABLES_LIKE),
        )
        return dict(cursor.fetchall())


def compact_measured_tables() -> None:
    """Give back the free space earlier runs' deleted rows left in the measured tables. Without it the first half
    of a run refills that space for free and the halves' ratio reads as if growth were quadratic (1.98 on a reused
    database against 1.28 on a fresh one, same code)."""
    with connection.cursor() as cursor:
        for name in sorted(table_sizes()):
            cursor.execute(f'VACUUM (FULL) "{name}"')


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
            {"id": "m", "type": "simpleMemory", "params": {}},
        ],
        "edges": [
            {"source": "t", "sourceHandle": "output-main", "target": "a", "targetHandle": "input-main"},
            {"source": "c", "sourceHandle": "output-context", "target": "a", "targetHandle": "input-context"},
            {"source": "m", "sourceHandle": "output-tool", "target": "a", "targetHandle": "input-tools"},
        ],
    }
    outcome = workflow_create(owner=owner, name="conversation growth", graph=graph)
    generation, _ = workflow_start(workflow=outcome.workflow)
    return outcome.workflow, generation.number, outcome.aliases["a"]


def prompt(turn: int) -> str:
    if turn % 4 == 0:
        return f"remember: fact number {turn} is that the meeting room {turn} seats {turn % 17 + 3} people"
    return f"turn {turn}: " + ("please keep this in mind as part of our long conversation. " * 27)[:1600]


def wide_window_catalogue() -> str:
    catalogue = json.loads(Path(CATALOGUE_PATH).read_text())
    catalogue["offline"]["*"]["context_window"] = 10_000_000
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)  # noqa: SIM115 (read by the worker)
    json.dump(catalogue, handle)
    handle.close()
    return handle.name


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=250)
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--keep-free-space", action="store_true", help="skip the VACUUM FULL of the measured tables before the run"
    )
    args = parser.parse_args()
    settings.AGENT_EXECUTION_MODE = "celery"
    os.environ["PROVIDER_CATALOGUE_PATH"] = wide_window_catalogue()

    if not args.keep_free_space:
        compact_measured_tables()
    owner = get_user_model().objects.create_user(username=f"bench-growth-{os.getpid()}-{int(time.time())}")
    load_before = os.getloadavg()[0]
    worker = start_worker(args.concurrency)
    ends = TurnEnds()
    try:
        workflow, generation, agent = make_workflow(owner)
        warm_workflow, warm_generation, warm_agent = make_workflow(owner)
        wait_finished(  # pool processes import and connect first
            ends,
            firing_start(
                workflow=warm_workflow, generation=warm_generation, agent_node_id=warm_agent, prompt="warm up"
            ),
            timeout=120,
        )
        before = table_sizes()
        durations: list[float] = []
        half_sizes = None
        for turn in range(1, args.turns + 1):
            firing = wait_finished(
                ends,
                firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt(turn)),
                timeout=120,
            )
            durations.append((firing.finished_at - firing.created_at).total_seconds() * 1000)
            if turn == args.turns // 2:
                half_sizes = table_sizes()
        after = table_sizes()
        header = AgentConversation.objects.get(workflow=workflow, generation=generation, agent_node_id=agent)

        def around(turn: int) -> float:
            index = min(max(turn - 1, 4), len(durations) - 5)
            return statistics.median(durations[index - 4 : index + 5])

        marks = [t for t in (10, 50, 100, 250) if t <= args.turns]
        print(f"conversation growth: {args.turns} turns into one conversation, offline provider at zero delay, "
              f"real worker (concurrency {args.concurrency})")  # fmt: skip
        print(
            "  turn time (median of the 9 turns around): " + "  ".join(f"turn {t}: {around(t):.1f} ms" for t in marks)
        )
        grown = {name: after.get(name, 0) - before.get(name, 0) for name in after}
        print("  bytes grown per table (pg_total_relation_size):")
        for name, size in sorted(grown.items(), key=lambda item: -item[1]):
            if size:
                print(f"    {name:<40} {size / 1e6:8.3f} MB")
        total = sum(grown.values())
        first_half = sum(half_sizes.get(n, 0) - before.get(n, 0) for n in half_sizes) if half_sizes else 0
        second_half = total - first_half
        print(f"  total {total / 1e6:.2f} MB; stored conversation: {header.message_count} messages, "
              f"{header.size_bytes / 1e6:.2f} MB of message JSON")  # fmt: skip
        ratio = around(marks[-1]) / around(10)
        print(
            f"  target: turn {marks[-1]} within 1.3x of turn 10: {ratio:.2f}x -> {'met' if ratio <= 1.3 else 'NOT met'}"
        )
        print(f"  target: total bytes <= 5 MB after 250 turns: {total / 1e6:.2f} MB -> "
              f"{'met' if total <= 5e6 else 'NOT met'}")  # fmt: skip
        if first_half:
            growth = second_half / first_half
            print(f"  target: linear growth (second half / first half <= 1.5): {growth:.2f} -> "
                  f"{'met' if growth <= 1.5 else 'NOT met'}")  # fmt: skip
        print(f"  load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    finally:
        ends.close()
        stop_process(worker)
        owner.delete()  # its workflows, conversations, firings and memory go with it
    return 0


if __name__ == "__main__":
    sys.exit(main())
