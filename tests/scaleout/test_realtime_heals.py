"""An open page across Redis losing its data, as the page's socket sees it.

A Redis restart drops every connection: the socket closes (1011) and the page reconnects; its `hello` carries the
new hub epoch, and the snapshot it refetches has the run's text streamed before the restart again (re-seeded by
the worker streaming it) with a seq that counts in the new epoch. A Redis that forgets its keys without dropping
connections (a flush) leaves sockets open but outside their groups: they re-join on their own and say `hello`.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
import redis

from tests.scaleout.cluster import Cluster, collect_until

pytestmark = pytest.mark.slow

WORDS = " ".join(f"w{i}" for i in range(240))  # echoed 3 words per delta: 80 deltas


def _reconnect(cluster: Cluster, cookie: str, *, timeout: float):
    """What the page does after its socket closed: try again until the server takes it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket = cluster.socket("web1", cookie)
            hello = collect_until(socket, lambda ev: ev[-1]["type"] == "hello", timeout=5)[-1]
            return socket, hello
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_pages_hear_again_after_redis_loses_its_data_and_the_streamed_text_is_reseeded(services_path, cluster_template):
    cluster = Cluster(
        services_path,
        cluster_template,
        OFFLINE_PROVIDER_DELAY_MS="120",  # ~10 s of streaming: the restart lands mid-answer
        AGENT_WATCHDOG_INTERVAL_SECONDS="1",
        WEBSOCKET_REJOIN_SECONDS="1",
    )
    try:
        cluster.start_web("web1")
        cluster.start_worker("w1", beat=True)
        cookie = cluster.session_cookie("web1")
        socket = cluster.socket("web1", cookie)
        first_epoch = collect_until(socket, lambda ev: ev[-1]["type"] == "hello", timeout=10)[-1]["hub_epoch"]
        status, body = cluster.api(
            "web1",
            "POST",
            f"/api/workflows/{cluster.workflow_id}/chat/messages/",
            {"text": WORDS, "client_message_id": uuid.uuid4().hex},
        )
        assert status == 201, body
        run_id = body["run"]["id"]
        before = collect_until(socket, lambda ev: sum(e.get("type") == "run.delta" for e in ev) >= 5, timeout=30)
        streamed_before = "".join(e["text"] for e in before if e.get("type") == "run.delta")

        cluster.restart_redis(empty=True)
        events: list[dict] = []
        try:  # the socket may live through the restart or be closed by it; either way the page hears again
            events += collect_until(socket, lambda ev: ev[-1]["type"] == "hello", timeout=10)
            hello = events[-1]
        except Exception:
            socket.close()
            socket, hello = _reconnect(cluster, cookie, timeout=20)
        assert hello["hub_epoch"] not in (first_epoch, "unavailable")

        # What the page refetches on the new epoch: the text from before the restart is back, seq in the new epoch.
        status, snapshot = cluster.api("web1", "GET", f"/api/workflows/{cluster.workflow_id}/chat/")
        assert status == 200 and snapshot["hub_epoch"] == hello["hub_epoch"], snapshot.get("hub_epoch")
        active = snapshot["active_run"]
        assert active is not None and active["id"] == run_id, "the answer is still streaming"
        rest: list[dict] = []
        if not active["partial_text"]:
            # Refetched before the worker's next batch re-seeded the text: that batch skips a seq, and the page,
            # seeing the gap, refetches (chat.js) — as here.
            rest += collect_until(
                socket,
                lambda ev: any(
                    e.get("type") in ("run.delta", "run.finished") and e.get("run_id") == run_id for e in ev
                ),
                timeout=30,
            )
            first = next(e for e in rest if e.get("run_id") == run_id)
            assert first["seq"] > active["seq"] + 1, (first, active["seq"])  # the gap the page acts on
            status, snapshot = cluster.api("web1", "GET", f"/api/workflows/{cluster.workflow_id}/chat/")
            active = snapshot["active_run"]
            assert active is not None and active["id"] == run_id, "the answer is still streaming"
        assert active["partial_text"].startswith(streamed_before), (streamed_before, active["partial_text"])
        rest += collect_until(socket, lambda ev: any(e.get("type") == "run.finished" for e in ev), timeout=60)
        finished = next(e for e in rest if e.get("type") == "run.finished")
        assert finished["outcome"] == "answered" and finished["hub_epoch"] == hello["hub_epoch"], finished
        # Applying the deltas past the snapshot's seq, as the page does, gives exactly the saved answer.
        mine = [e for e in events + rest if e.get("run_id") == run_id and e.get("hub_epoch") == hello["hub_epoch"]]
        seqs = [e["seq"] for e in mine]
        assert seqs == sorted(set(seqs)), seqs
        tail = "".join(e["text"] for e in mine if e["type"] == "run.delta" and e["seq"] > active["seq"])
        status, thread = cluster.api("web1", "GET", f"/api/workflows/{cluster.workflow_id}/chat/")
        answer = thread["messages"][-1]
        assert answer["role"] == "assistant" and answer["status"] == "complete", answer
        assert active["partial_text"] + tail == answer["text"], json.dumps(
            {"partial": active["partial_text"], "tail": tail, "answer": answer["text"]}
        )

        # Redis forgets its keys while every connection stays up: the open socket re-joins and says hello.
        redis.Redis.from_url(cluster.redis_url).flushall()
        again = collect_until(socket, lambda ev: ev[-1]["type"] == "hello", timeout=10)[-1]
        assert again["hub_epoch"] not in (hello["hub_epoch"], "unavailable")
        # ...and hears the workflow's events again: rating the answer announces chat.updated to the group.
        status, _ = cluster.api(
            "web1",
            "POST",
            f"/api/workflows/{cluster.workflow_id}/chat/messages/{answer['id']}/feedback/",
            {"rating": "good"},
        )
        assert status == 200
        updated = collect_until(socket, lambda ev: ev[-1]["type"] == "chat.updated", timeout=10)[-1]
        assert updated["reason"] == "feedback"
        socket.close()
    finally:
        cluster.stop()
