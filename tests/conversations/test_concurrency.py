"""Invariant 10: two firings of one conversation never interleave inside a turn and never lose each other's turns.

Each firing runs in its own thread with its own database connection; the interleaving is forced with events,
not hoped for.
"""

import threading
import time

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
from conversations.wire import validate_messages
from tests.conversations.factories import assistant, result

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
    a_loaded, b_refused = threading.Event(), threading.Event()
    errors: list = []
    order: list[str] = []

    def firing_a():
        with firing_lease(key, owner_token="firing-a", ttl_seconds=30):
            prompt, answer = _firing_turn("a")
            sent = seed_request("You are the agent.", load_conversation(key), prompt)
            a_loaded.set()
            # Hold the turn open until B has tried to start: B must not get in between load and save.
            assert b_refused.wait(10)
            time.sleep(0.2)
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

    threads = [_in_thread(firing_a, errors), _in_thread(firing_b, errors)]
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert order == ["a saved", "b started"]

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
    time.sleep(1.3)
    assert acquire_firing_lease(key, owner_token="next", ttl_seconds=30)
    assert not renew_firing_lease(key, owner_token="dead-worker")
    assert not release_firing_lease(key, owner_token="dead-worker")  # cannot free someone else's lease
    assert firing_lease_holder(key) == "next"
    assert renew_firing_lease(key, owner_token="next", ttl_seconds=30)
    assert release_firing_lease(key, owner_token="next")
    assert firing_lease_holder(key) is None


def test_concurrent_saves_queue_on_the_header_row_lock(key):
    save_conversation(key, [assistant("start")])
    holding, errors = threading.Event(), []
    finished: dict[str, float] = {}

    def writer_a():
        with transaction.atomic():
            save_conversation(key, [assistant("start"), assistant("from a")])
            holding.set()
            time.sleep(0.5)
            finished["a"] = time.monotonic()

    def writer_b():
        assert holding.wait(10)
        started = time.monotonic()
        save_conversation(key, [assistant("start"), assistant("from a"), assistant("from b")])
        finished["b"] = time.monotonic()
        finished["b waited"] = finished["b"] - started

    threads = [_in_thread(writer_a, errors), _in_thread(writer_b, errors)]
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert finished["b"] >= finished["a"] and finished["b waited"] >= 0.3
    stored = load_conversation(key)
    assert [m["blocks"][0]["text"] for m in stored] == ["start", "from a", "from b"]
