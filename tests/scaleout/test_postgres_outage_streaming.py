"""An answer streaming while PostgreSQL is stopped, as the page's socket sees it (docs/deploy.md, "When something
is down"): the answer goes on streaming during the outage (the Stop check no longer waits for a database
connection on the streaming thread), then finishes and is saved whole."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.scaleout.cluster import Cluster, collect_until

pytestmark = pytest.mark.slow

WORDS = " ".join(f"w{i}" for i in range(240))  # echoed 3 words per delta: 80 deltas
OUTAGE_SECONDS = 5


def _listen(socket, seconds: float) -> list[tuple[float, dict]]:
    """Every event the socket hears for `seconds`, with when it arrived."""
    heard: list[tuple[float, dict]] = []
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        try:
            raw = socket.recv(timeout=left)
        except TimeoutError:
            break
        heard.append((time.monotonic(), json.loads(raw)))
    return heard


def test_an_answer_streaming_through_a_postgres_outage_finishes_and_is_saved_whole(services_path, cluster_template):
    cluster = Cluster(
        services_path, cluster_template, OFFLINE_PROVIDER_DELAY_MS="100", AGENT_WATCHDOG_INTERVAL_SECONDS="1"
    )
    try:
        cluster.start_web("web1")
        cluster.start_worker("w1", beat=True)
        cookie = cluster.session_cookie("web1")
        socket = cluster.socket("web1", cookie)
        collect_until(socket, lambda ev: ev[-1]["type"] == "hello", timeout=10)
        status, body = cluster.api(
            "web1",
            "POST",
            f"/api/workflows/{cluster.workflow_id}/chat/messages/",
            {"text": WORDS, "client_message_id": uuid.uuid4().hex},
        )
        assert status == 201, body
        run_id = body["run"]["id"]
        before = collect_until(socket, lambda ev: sum(e.get("type") == "run.delta" for e in ev) >= 5, timeout=30)

        cluster._services_python("e.stop_postgres()", timeout=120)
        stopped = time.monotonic()
        during = _listen(socket, OUTAGE_SECONDS)
        cluster._services_python("print(e.ensure_postgres())", timeout=120)
        back = time.monotonic()
        rest = collect_until(socket, lambda ev: any(e.get("type") == "run.finished" for e in ev), timeout=90)

        deltas_during = [e for _, e in during if e.get("type") == "run.delta" and e.get("run_id") == run_id]
        print(
            f"outage {back - stopped:.1f} s: {len(deltas_during)} deltas heard during it, "
            f"{sum(e.get('type') == 'run.delta' for e in rest)} after"
        )
        # At one delta per 100 ms the page would hear ~50 in the outage's first 5 s; a paused stream gave it 5.
        assert len(deltas_during) >= 20, f"the answer paused for the outage ({len(deltas_during)} deltas heard)"
        finished = next(e for e in rest if e.get("type") == "run.finished")
        assert finished["outcome"] == "answered", finished
        status, thread = cluster.api("web1", "GET", f"/api/workflows/{cluster.workflow_id}/chat/")
        answer = thread["messages"][-1]
        assert answer["role"] == "assistant" and answer["status"] == "complete", answer
        heard = [e for e in before + [e for _, e in during] + rest if e.get("type") == "run.delta"]
        assert "".join(e["text"] for e in heard if e.get("run_id") == run_id) == answer["text"]
    finally:
        cluster.stop()
