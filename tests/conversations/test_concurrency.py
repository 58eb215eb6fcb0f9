"""docs/invariants.md#one-firing-per-conversation: two firings of one conversation never interleave inside a turn
and never lose each other's turns.

Each firing runs in its own thread with its own database connection; the interleaving is forced with events and
hooks (tests/race.py), not hoped for, and nothing waits on time.
"""

import threading

import pytest
from django.db import connection, transaction

from conversations.store import (
    FiringLeaseBusy,
    acquire_firing_lease,
    firing_lease,
    firing_lease_holder,
    load_conversation,
    release_firing_lease,
    renew_firing_lease,
    save_conversation,
    seed_request,
)
from providers.wire import validate_messages
from tests.conversations.factories import assistant, result
from tests.race import Competitor, run_after, wait_until, waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(target, errors):
    def run():
        try:
            target()
        except BaseException as exc:  # surfaced by the test below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _firing_turn(name: str) -> tuple[str, list[dict]]:
    call = f"{name}-call"
    return f"question from {name}", [
        assistant(calls=[(call, "memory", {"operation": "recall", "query": name})]),
        result(call, f"{name} result"),
        assistant(f"answer to {name}"),
    ]


def test_two_firings_of_one_key_serialize_and_keep_both_turns(key):
    a_loaded, b_refused, b_waiting = threading.Event(), threading.Event(), threading.Event()
    errors: list = []
    order: list[str] = []
    refusals = []

    def count_refusals(key_, *, owner_token, ttl_seconds=None):
        # Runs after each attempt of the waiting form (`firing_lease` polls `acquire_firing_lease`).
        if owner_token == "firing-b" and firing_lease_holder(key) != "firing-b":
            refusals.append(1)
            b_waiting.set()  # a poll of the waiting form was refused: B is waiting now

    def firing_a():
        with firing_lease(key, owner_token="firing-a", ttl_seconds=30):
            prompt, answer = _firing_turn("a")
            sent = seed_request("You are the agent.", load_conversation(key), prompt)
            a_loaded.set()
            # Hold the turn open until B was refused and is waiting: B must not get in between load and save.
            assert b_refused.wait(10) and b_waiting.wait(10)
            save_conversation(key, [*sent, *answer])
            order.append("a saved")

    def firing_b():
        assert a_loaded.wait(10)
        # A non-blocking attempt while A is mid-turn is refused (a Celery task would re-queue itself)...
        assert not acquire_firing_lease(key, owner_token="firing-b", ttl_seconds=30)
        b_refused.set()
        # ...and a waiting one gets in only after A released.
        with firing_lease(key, owner_token="firing-b", ttl_seconds=30, wait_seconds=20, poll_seconds=0.02):
            order.append("b started")
            prompt, answer = _firing_turn("b")
            sent = seed_request("You are the agent.", load_conversation(key), prompt)
            save_conversation(key, [*sent, *answer])

    with run_after("conversations.store.leases.acquire_firing_lease", count_refusals, once=False):
        threads = [_in_thread(firing_a, errors), _in_thread(firing_b, errors)]
        for thread in threads:
            thread.join(30)
    assert not errors, errors
    assert order == ["a saved", "b started"] and refusals

    stored = load_conversation(key)
    texts = [b.get("text") for m in stored for b in m["blocks"] if b["type"] == "text"]
    assert texts == ["You are the agent.", "question from a", "answer to a", "question from b", "answer to b"]
    assert [m["role"] for m in stored].count("system") == 1
    validate_messages(stored)
    assert firing_lease_holder(key) is None


def test_a_waiting_firing_gives_up_with_busy(key):
    assert acquire_firing_lease(key, owner_token="holder", ttl_seconds=30)
    with pytest.raises(FiringLeaseBusy), firing_lease(key, owner_token="other", wait_seconds=0.1):
        pass
    assert firing_lease_holder(key) == "holder"


def test_a_dead_workers_lease_expires_and_cannot_be_renewed_after_takeover(key):
    assert acquire_firing_lease(key, owner_token="dead-worker", ttl_seconds=1)
    assert not acquire_firing_lease(key, owner_token="next", ttl_seconds=30)
    assert acquire_firing_lease(key, owner_token="dead-worker", ttl_seconds=1)  # re-acquiring our own renews
    _expire_lease(key)  # the dead worker's TTL ran out (the database's clock decides, so move its end instead)
    assert acquire_firing_lease(key, owner_token="next", ttl_seconds=30)
    assert not renew_firing_lease(key, owner_token="dead-worker")
    assert not release_firing_lease(key, owner_token="dead-worker")  # cannot free someone else's lease
    assert firing_lease_holder(key) == "next"
    assert renew_firing_lease(key, owner_token="next", ttl_seconds=30)
    assert release_firing_lease(key, owner_token="next")
    assert firing_lease_holder(key) is None


def test_concurrent_saves_queue_on_the_header_row_lock(key):
    """Given a save holding the header row in its open transaction, when a second save of the key starts, then it
    waits for that lock (seen in pg_stat_activity, not guessed from time) and appends after the first commits."""
    save_conversation(key, [assistant("start")])
    with transaction.atomic():
        save_conversation(key, [assistant("start"), assistant("from a")])
        second = Competitor(
            lambda: save_conversation(key, [assistant("start"), assistant("from a"), assistant("from b")]),
            name="writer b",
        ).start()
        wait_until(lambda: second.done or waiting_on_a_lock(pid=second.pid), what="the second save")
        assert not second.done, "the second save did not wait for the header lock the first holds"
    second.result()
    stored = load_conversation(key)
    assert [m["blocks"][0]["text"] for m in stored] == ["start", "from a", "from b"]


def _expire_lease(key) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE conversations_firinglease SET expires_at = now() - interval '1 second' "
            "WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s",
            [key.workflow_id, key.generation, key.agent_node_id],
        )
