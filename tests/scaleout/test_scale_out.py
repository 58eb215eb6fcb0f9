"""Two web processes and two Celery workers on one PostgreSQL and one Redis; then each of those restarts."""

from __future__ import annotations

import contextlib
import uuid

import pytest
import redis

from providers.wire import validate_messages
from tests.scaleout.cluster import Cluster, collect_until
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def _finished(run_id):
    return lambda events: any(e.get("type") == "run.finished" and e.get("run_id") == run_id for e in events)


def _run_events(events: list[dict], run_id: int) -> list[dict]:
    return [e for e in events if e.get("run_id") == run_id and "seq" in e]


def _send(cluster: Cluster, web: str, text: str) -> dict:
    status, body = cluster.api(
        web,
        "POST",
        f"/api/workflows/{cluster.workflow_id}/chat/messages/",
        {"text": text, "client_message_id": uuid.uuid4().hex},
    )
    assert status == 201, (status, body)
    return body["run"]


def _wait_run(cluster: Cluster, web: str, run_id: int, timeout: float = 60) -> dict:
    def ended():
        status, run = cluster.api(web, "GET", f"/api/workflows/{cluster.workflow_id}/chat/runs/{run_id}/")
        return run if status == 200 and run["state"] in ("finished", "error", "stopped") else None

    return wait_until(ended, timeout=timeout, interval=0.2, what=f"run {run_id} to end")


def _stored_conversation(cluster: Cluster, web: str) -> list[dict]:
    status, listing = cluster.api(web, "GET", f"/api/workflows/{cluster.workflow_id}/conversations/")
    assert status == 200, listing
    (entry,) = listing["results"]
    status, detail = cluster.api(
        web, "GET", f"/api/workflows/{cluster.workflow_id}/conversations/{entry['agent_node_id']}/?page_size=1000"
    )
    assert status == 200, detail
    return detail["messages"]


@pytest.fixture
def cluster(services_path, cluster_template):
    instance = Cluster(
        services_path, cluster_template, OFFLINE_PROVIDER_DELAY_MS="20", AGENT_WATCHDOG_INTERVAL_SECONDS="1"
    )
    try:
        yield instance
    finally:
        instance.stop()


def test_every_event_reaches_both_web_processes_and_no_turn_is_lost(cluster):
    cluster.start_web("web1")
    cluster.start_web("web2")
    w1 = cluster.start_worker("w1", beat=True)
    w2 = cluster.start_worker("w2")
    with contextlib.ExitStack() as stack:
        sockets = {
            web: stack.enter_context(cluster.socket(web, cluster.session_cookie(web))) for web in ("web1", "web2")
        }
        for socket in sockets.values():
            assert collect_until(socket, lambda ev: ev[-1]["type"] == "hello", timeout=10)[-1]["hub_epoch"]
        turns = 6
        for i in range(turns):
            web = "web1" if i % 2 == 0 else "web2"  # the page posts to either web process
            run = _send(cluster, web, f"message {i} through {web}")
            seen = {name: collect_until(socket, _finished(run["id"]), timeout=60) for name, socket in sockets.items()}
            streams = {name: _run_events(events, run["id"]) for name, events in seen.items()}
            for name, stream in streams.items():
                seqs = [e["seq"] for e in stream]
                assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (name, seqs)  # no gap, no duplicate
                assert stream[-1]["type"] == "run.finished" and stream[-1]["outcome"] == "answered", stream[-1]
            assert streams["web1"] == streams["web2"]  # both pages got the same events
    status, thread = cluster.api("web2", "GET", f"/api/workflows/{cluster.workflow_id}/chat/")
    assert status == 200
    roles = [m["role"] for m in thread["messages"]]
    assert roles == ["user", "assistant"] * turns, roles
    stored = _stored_conversation(cluster, "web1")
    validate_messages(stored)
    assert [m["role"] for m in stored] == ["system"] + ["user", "assistant"] * turns
    assert "agent.execute_llm_step" in w1.log() and "agent.execute_llm_step" in w2.log(), "runs landed on both"


def test_a_redis_restart_mid_answer_ends_the_run_cleanly_and_the_page_resyncs(services_path, cluster_template):
    cluster = Cluster(
        services_path,
        cluster_template,
        OFFLINE_PROVIDER_DELAY_MS="150",
        AGENT_WATCHDOG_INTERVAL_SECONDS="1",
        AGENT_STEP_LOST_AFTER_SECONDS="5",
    )
    try:
        cluster.start_web("web1")
        cluster.start_worker("w1", beat=True)
        with cluster.socket("web1", cluster.session_cookie("web1")) as socket:
            first_epoch = collect_until(socket, lambda ev: ev[-1]["type"] == "hello", timeout=10)[-1]["hub_epoch"]
            run = _send(cluster, "web1", "tell me something while Redis goes away")
            collect_until(socket, lambda ev: any(e.get("type") == "run.delta" for e in ev), timeout=30)
            cluster.restart_redis()
        ended = _wait_run(cluster, "web1", run["id"], timeout=90)
        assert ended["state"] in ("finished", "error"), ended
        if ended["state"] == "error":
            assert ended["error_code"], "a failed run names its code"
        # The page reconnects and learns whether to trust its event sequence.
        with cluster.socket("web1", cluster.session_cookie("web1")) as again:
            hello = collect_until(again, lambda ev: ev[-1]["type"] == "hello", timeout=20)[-1]
        # Redis kept its data (append-only file), so the epoch may stay; a flushed Redis would show a new one.
        assert hello["hub_epoch"] not in ("", "unavailable"), first_epoch
        stored = _stored_conversation(cluster, "web1")
        validate_messages(stored)  # nothing half-saved
        # And the product works again after the restart.
        after = _wait_run(cluster, "web1", _send(cluster, "web1", "are you back?")["id"], timeout=90)
        assert after["state"] == "finished", after
        # A Redis that comes back empty gives the hub a new epoch: pages then refetch instead of trusting seqs.
        redis.Redis.from_url(cluster.redis_url).flushall()
        with cluster.socket("web1", cluster.session_cookie("web1")) as fresh:
            reborn = collect_until(fresh, lambda ev: ev[-1]["type"] == "hello", timeout=20)[-1]["hub_epoch"]
        assert reborn not in (first_epoch, "unavailable")
    finally:
        cluster.stop()


def test_a_postgres_restart_between_turns_is_survived(services_path, cluster_template):
    cluster = Cluster(services_path, cluster_template, OFFLINE_PROVIDER_DELAY_MS="0")
    try:
        cluster.start_web("web1")
        cluster.start_worker("w1", beat=True)
        assert _wait_run(cluster, "web1", _send(cluster, "web1", "before the restart")["id"])["state"] == "finished"
        cluster.restart_postgres()
        after = _wait_run(cluster, "web1", _send(cluster, "web1", "after the restart")["id"])
        assert after["state"] == "finished", after
        stored = _stored_conversation(cluster, "web1")
        assert [m["role"] for m in stored] == ["system", "user", "assistant", "user", "assistant"]
    finally:
        cluster.stop()
