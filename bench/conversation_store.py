"""Benchmark of the conversation store on the embedded PostgreSQL.

    OPENCOMPANY_DATA_DIR=/tmp/oc-bench .venv/bin/python bench/conversation_store.py [--rounds 60]

For conversations of 10, 100 and 1,000 messages (realistic sizes: user text, assistant text with a tool call, a
1.5 KB tool result, a closing answer; ~2.5 KB per 4-message turn) it prints p50/p95 of:
  save (append)       an appended turn through the verified path: the caller passes only the whole list and this
                      process holds its copy of the stored list (it loaded or wrote it last), so the prefix is
                      checked against that copy: prefix check, one conditional statement (header + rows), commit
  cpu                 this process's CPU time for that save (what the store itself costs on the client side,
                      unaffected by waiting for the database or for a CPU on a busy machine)
  +event              the same save including the on-commit `context.updated` broadcast (core.realtime)
  save (cold append)  the same with no per-process copy (another process wrote last): hashes the list
  load                load_conversation of the whole conversation
  known prefix        the runtime's path (agent.persist_turn): a process with no copy appends after the stored
                      prefix its firing knows (length, version, digest), checked by the statement itself
and the bytes stored (sum of the JSONB column) against the messages' own serialized size, then each target with
its verdict, for both append paths.
It creates a throwaway user and workflow in a test database it drops at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from figures import percentile  # noqa: E402  (bench/, the script's own folder)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.test")


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(string.ascii_letters + "      .,", k=n))


def make_turn(rng: random.Random, index: int) -> list[dict]:
    call_id = f"call_{index}"
    arguments = json.dumps({"operation": "recall", "query": _text(rng, 30)})
    return [
        {"role": "user", "blocks": [{"type": "text", "text": _text(rng, 200)}]},
        {
            "role": "assistant",
            "blocks": [
                {"type": "text", "text": _text(rng, 300)},
                {
                    "type": "tool_call",
                    "id": call_id,
                    "name": "memory",
                    "arguments_raw": arguments,
                    "arguments": json.loads(arguments),
                },
            ],
            "usage": {"input_tokens": 1200 + index, "output_tokens": 80},
        },
        {
            "role": "tool",
            "blocks": [
                {
                    "type": "tool_result",
                    "tool_call_id": call_id,
                    "name": "memory",
                    "content": _text(rng, 1500),
                    "is_error": False,
                }
            ],
        },
        {"role": "assistant", "blocks": [{"type": "text", "text": _text(rng, 400)}], "usage": {"input_tokens": 1500}},
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument(
        "--async-commit",
        action="store_true",
        help="SET synchronous_commit = off for the session: measures the store without the WAL flush of each commit "
        "(on a busy shared disk the flush alone can take longer than everything else)",
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases

    settings.DEBUG = False  # no query log: measure the store, not Django's debug cursor
    setup_test_environment()
    old_config = setup_databases(verbosity=0, interactive=False, serialized_aliases=[])
    try:
        from django.contrib.auth import get_user_model

        from conversations import events
        from conversations.models import ConversationMessage
        from conversations.store import (
            StoredPrefix,
            conversation_key,
            forget_process_copies,
            load_conversation,
            save_conversation,
        )
        from workflows.models import Workflow

        user = get_user_model().objects.create_user(username="bench", password="bench-password-1")
        workflow = Workflow.objects.create(owner=user, name="bench")
        rng = random.Random(7)
        loud = events.publish_workflow_event

        def quiet(**kwargs):
            return None

        system = {"role": "system", "blocks": [{"type": "text", "text": "You are a careful assistant. " * 20}]}

        with connection.cursor() as cursor:
            if args.async_commit:
                cursor.execute("SET synchronous_commit = off")
            cursor.execute("SHOW synchronous_commit")
            commit_mode = cursor.fetchone()[0]
        print(
            f"PostgreSQL {connection.pg_version}, synchronous_commit={commit_mode}, {args.rounds} rounds per "
            f"measurement, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, times in ms"
        )
        print(
            f"{'messages':>8} | {'save p50':>8} {'p95':>6} {'cpu p50':>7} | {'+event p50':>10} {'p95':>6} | "
            f"{'cold p50':>8} {'p95':>6} | {'load p50':>8} {'p95':>6} | bytes stored / own size"
        )
        # Every round measures every size in turn, so a noisy moment on the machine hits all sizes alike.
        sizes = (10, 100, 1000)
        state = {}
        for size in sizes:
            key = conversation_key(workflow.pk, 1, f"{workflow.pk}:agent:{size}")
            # `size` messages once the measured turn (4 messages) is appended.
            base, turn_index = [system], 0
            while len(base) < size - 4:
                base += make_turn(rng, turn_index)
                turn_index += 1
            save_conversation(key, base[: size - 4])
            state[size] = {"key": key, "messages": load_conversation(key), "turn": turn_index}
        timings = {size: {"warm": [], "cpu": [], "event": [], "cold": [], "known": [], "load": []} for size in sizes}

        def timed(fn) -> float:
            started = time.perf_counter()
            fn()
            return (time.perf_counter() - started) * 1000

        for _ in range(args.rounds):
            for size in sizes:
                key, messages, t = state[size]["key"], state[size]["messages"], timings[size]
                state[size]["turn"] += 1
                candidate = messages + make_turn(rng, state[size]["turn"])
                events.publish_workflow_event = quiet
                cpu_started = time.process_time()
                t["warm"].append(timed(lambda k=key, c=candidate: save_conversation(k, c)))
                t["cpu"].append((time.process_time() - cpu_started) * 1000)
                save_conversation(key, messages)  # back to the same length (a rewrite, not measured)
                events.publish_workflow_event = loud
                t["event"].append(timed(lambda k=key, c=candidate: save_conversation(k, c)))
                save_conversation(key, messages)
                events.publish_workflow_event = quiet
                forget_process_copies(key)
                t["cold"].append(timed(lambda k=key, c=candidate: save_conversation(k, c)))
                restored = save_conversation(key, messages)
                # The runtime's path: a worker process with no copy appends after the stored prefix it knows.
                forget_process_copies(key)
                known = StoredPrefix.of(restored)
                t["known"].append(timed(lambda k=key, c=candidate, p=known: save_conversation(k, c, known_prefix=p)))
                save_conversation(key, messages)
                t["load"].append(timed(lambda k=key, s=state[size]: s.__setitem__("messages", load_conversation(k))))
        events.publish_workflow_event = loud

        results = {}
        for size in sizes:
            key, t = state[size]["key"], timings[size]
            stored_messages = load_conversation(key)
            own = sum(len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()) for m in stored_messages)
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT coalesce(sum(pg_column_size(data) + pg_column_size(hash) + pg_column_size(chain)), 0) "
                    f"FROM {ConversationMessage._meta.db_table} m JOIN conversations_agentconversation c "
                    "ON c.id = m.conversation_id WHERE c.agent_node_id = %s",
                    [key.agent_node_id],
                )
                stored_bytes = cursor.fetchone()[0]
            results[size] = statistics.median(t["warm"])
            print(
                f"{size:>8} | {percentile(t['warm'], 0.5):>8.2f} {percentile(t['warm'], 0.95):>6.2f} "
                f"{percentile(t['cpu'], 0.5):>7.2f} | "
                f"{percentile(t['event'], 0.5):>10.2f} {percentile(t['event'], 0.95):>6.2f} | "
                f"{percentile(t['cold'], 0.5):>8.2f} {percentile(t['cold'], 0.95):>6.2f} | "
                f"{percentile(t['load'], 0.5):>8.2f} {percentile(t['load'], 0.95):>6.2f} | "
                f"{stored_bytes:,} / {own:,} ({stored_bytes / max(own, 1):.2f}x)"
            )
        known = {size: timings[size]["known"] for size in sizes}
        print(
            "append after a known prefix, no process copy (what agent.persist_turn does): "
            + "  ".join(
                f"{size}: p50 {percentile(known[size], 0.5):.2f} p95 {percentile(known[size], 0.95):.2f}"
                for size in sizes
            )
        )
        cpu = {size: statistics.median(timings[size]["cpu"]) for size in sizes}
        print(f"client CPU of a verified appended save at 1,000 / at 100: {cpu[1000] / cpu[100]:.2f}x")

        def verdict(label: str, samples: dict) -> None:
            at_100, at_1000 = statistics.median(samples[100]), statistics.median(samples[1000])
            met = at_1000 <= 3.0 and at_1000 <= 1.5 * at_100
            print(
                f"  {label}: p50 {at_1000:.2f} ms at 1,000, {at_1000 / at_100:.2f}x its p50 at 100 "
                f"-> {'met' if met else 'NOT met'}"
            )

        print("target: an appended turn's save p50 <= 3 ms at 1,000 messages and <= 1.5x its p50 at 100")
        verdict("runtime path (agent.persist_turn appends after the prefix it knows is stored)", known)
        verdict("verified path (only the list is passed; checked against this process's copy)", {
            size: timings[size]["warm"] for size in sizes
        })  # fmt: skip
        load_1000 = statistics.median(timings[1000]["load"])
        print(
            f"target: a load of 1,000 messages <= 10 ms: p50 {load_1000:.2f} ms "
            f"-> {'met' if load_1000 <= 10 else 'NOT met'}"
        )
    finally:
        teardown_databases(old_config, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
