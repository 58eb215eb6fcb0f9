#!/usr/bin/env python
"""Compaction under steady traffic: does a conversation that never pauses stay inside its window, and is each summary
paid for once? (docs/invariants.md#compaction)

One agent with a Context, the offline provider at zero delay, an 8,000-token window (a catalogue given to the
worker through PROVIDER_CATALOGUE_PATH; the model's output 1,000 tokens), a real Celery worker (prefork,
`--concurrency` processes, 2 by default: a summary runs beside the turns). Every summary call takes `--summary-s`
seconds longer than the offline one (2 s by default: the worker is started by `bench/compaction_worker.py`, which
wraps the summarizer with that sleep, standing in for a real provider's summary). The driver sends `--turns` turns
(200) back to back into the one conversation: the next one as soon as the previous one is persisted. Each turn is
~1,600 characters that the offline agent echoes, so a turn adds ~800 tokens and the threshold (80 %) is crossed
every ~8 turns, while a summary spans many turns.

It prints:
  * the highest pressure any request reached (its input tokens, as the offline provider counts them, over the
    window; with the answer's headroom too), target <= 100 %;
  * the highest pressure of the first request after each landing, target <= threshold + one turn;
  * summary calls (ledger rows, kind compaction) and how many were discarded, target 0 without edits;
  * turn latency (Firing.created_at -> finished_at) p50/p95 for turns sent while a compaction was in progress and
    for the others, and how many turns waited for a compaction before their first step;
  * the machine's load average before and after (the machine is shared).

    .venv/bin/python bench/compaction.py [--turns 200] [--summary-s 2] [--concurrency 2] [--turn-chars 1600]

With 1,600-character messages a turn is ~10 % of the window: the turn after a crossing finds the request over the
window (80 % + a turn + the answer's headroom) and waits for the summary. Smaller turns (`--turn-chars 400`) go on
during the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("DEBUG", "0")
if not os.environ.get("SECRET_KEY"):
    import secrets

    os.environ["SECRET_KEY"] = secrets.token_urlsafe(48)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from figures import percentile  # noqa: E402
from processes import stop_process  # noqa: E402
from turn_overhead import TurnEnds, make_workflow, wait_finished  # noqa: E402

from agents.models import Firing, LlmStep  # noqa: E402
from agents.services.firings import firing_start  # noqa: E402
from conversations.models import ConversationCompaction, UsageRecord  # noqa: E402
from providers.catalogue import CATALOGUE_PATH  # noqa: E402

WINDOW = 8000
OUTPUT = 1000


def small_window_catalogue() -> str:
    catalogue = json.loads(Path(CATALOGUE_PATH).read_text())
    catalogue["offline"]["*"] = {**catalogue["offline"]["*"], "context_window": WINDOW, "max_output_tokens": OUTPUT}
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)  # noqa: SIM115 (read by the worker)
    json.dump(catalogue, handle)
    handle.close()
    return handle.name


def start_worker(concurrency: int, summary_seconds: float) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": settings.DATABASE_URL,
        "REDIS_URL": settings.REDIS_URL,
        "OFFLINE_PROVIDER_DELAY_MS": "0",
        "LOG_LEVEL": "WARNING",
        "BENCH_SUMMARY_SECONDS": str(summary_seconds),
    }
    args = [sys.executable, str(ROOT / "bench" / "compaction_worker.py"), "-A", "opencompany", "worker", "-Q"]
    args += ["agent", "-c", str(concurrency), "--loglevel", "WARNING", "--without-mingle", "--without-gossip"]
    args += ["-n", f"benchcompaction{os.getpid()}@%h"]
    log = open(os.environ.get("BENCH_WORKER_LOG", os.devnull), "w")  # noqa: SIM115 (lives with the worker)
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def prompt(turn: int, chars: int) -> str:
    words = "we keep talking, and every word of it stays in the conversation. "
    return f"turn {turn}: " + (words * (chars // len(words) + 1))[:chars]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--summary-s", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
    parser.add_argument("--turn-chars", type=int, default=1600, help="characters per message (echoed back)")
    args = parser.parse_args()
    settings.AGENT_EXECUTION_MODE = "celery"
    os.environ["PROVIDER_CATALOGUE_PATH"] = small_window_catalogue()

    owner = get_user_model().objects.create_user(username=f"bench-compaction-{os.getpid()}-{int(time.time())}")
    load_before = os.getloadavg()
    worker = start_worker(args.concurrency, args.summary_s)
    ends = TurnEnds()
    try:
        warm = make_workflow(owner, 0)
        wait_finished(
            ends,
            firing_start(workflow=warm[0], generation=warm[1], agent_node_id=warm[2], prompt="warm up"),
            timeout=120,
        )  # pool processes import and connect first
        workflow, generation, agent = make_workflow(owner, 1)
        slot = ConversationCompaction.objects.filter(workflow=workflow, generation=generation, agent_node_id=agent)
        during: list[bool] = []
        firings = []
        started = time.monotonic()
        for turn in range(args.turns):
            during.append(slot.filter(state__in=["running", "ready"]).exists())
            fired = firing_start(
                workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt(turn, args.turn_chars)
            )
            firings.append(wait_finished(ends, fired, timeout=180))
        elapsed = time.monotonic() - started
        time.sleep(args.summary_s + 1)  # the last summary, if one runs, lands or is left ready

        ids = [f.pk for f in firings]
        latency = [(f.finished_at - f.created_at).total_seconds() * 1000 for f in firings]
        around = [ms for ms, flag in zip(latency, during, strict=True) if flag]
        apart = [ms for ms, flag in zip(latency, during, strict=True) if not flag]
        waited = LlmStep.objects.filter(firing_id__in=ids, iteration=1, started_at__isnull=False)
        waited = sum(
            1
            for step_start, prepared in waited.values_list("started_at", "firing__started_at")
            if prepared and (step_start - prepared).total_seconds() > 0.5
        )
        records = UsageRecord.objects.filter(workflow_id=workflow.pk, generation=generation, agent_node_id=agent)
        llm = list(records.filter(kind="llm").order_by("created_at", "pk").values_list("created_at", "input_tokens"))
        summaries = list(
            records.filter(kind="compaction").exclude(outcome="discarded").values_list("created_at", flat=True)
        )
        discarded = records.filter(kind="compaction", outcome="discarded").count()
        headroom = min(OUTPUT, int(WINDOW * (1 - settings.AGENT_COMPACTION_THRESHOLD)))
        highest = max(tokens for _, tokens in llm)
        after_landing = []
        for landed_at in sorted(summaries):
            following = next((tokens for at, tokens in llm if at > landed_at), None)
            if following is not None:
                after_landing.append(following)
        state = slot.values("summaries", "landed", "discarded").first() or {}
        failed = Firing.objects.filter(pk__in=ids).exclude(state=Firing.State.FINISHED).count()

        print(
            f"compaction under steady traffic: {args.turns} turns back to back into one conversation, "
            f"{WINDOW:,}-token window (answer headroom {headroom:,}), summary +{args.summary_s:g} s, offline provider, "
            f"real worker (concurrency {args.concurrency}), {args.turn_chars:,}-character messages; {elapsed:.1f} s"
        )
        print(
            f"  highest pressure at any request: {highest:,} tokens = {highest / WINDOW:.1%} of the window "
            f"({(highest + headroom) / WINDOW:.1%} with the answer's headroom) -> "
            f"{'met' if highest + headroom <= WINDOW else 'NOT met'} (target <= 100 %)"
        )
        if after_landing:
            worst = max(after_landing)
            print(
                f"  first request after each landing: highest {worst / WINDOW:.1%} of the window, median "
                f"{statistics.median(after_landing) / WINDOW:.1%} (threshold {settings.AGENT_COMPACTION_THRESHOLD:.0%} "
                "+ one turn ~10 %)"
            )
        print(
            f"  summary calls: {len(summaries)}; discarded: {discarded} (target 0); slot: {state.get('summaries')} "
            f"paid, {state.get('landed')} landed, {state.get('discarded')} discarded; turns not finished: {failed}"
        )
        for name, values in (("while a compaction ran", around), ("with none running", apart)):
            if values:
                print(
                    f"  turn latency {name}: {len(values)} turns, p50 {statistics.median(values):.0f} ms, "
                    f"p95 {percentile(values, 0.95):.0f} ms, max {max(values):.0f} ms"
                )
        print(f"  turns that waited for a compaction before their first step: {waited}")
        load_after = os.getloadavg()
        print(
            "  load average (1/5/15 min): "
            f"before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
            f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
        )
    finally:
        ends.close()
        stop_process(worker)
        owner.delete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
