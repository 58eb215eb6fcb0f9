"""A database blip costs a step time, never its answer: Stop checks, heartbeats and the answer's save ride it out."""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError

from agents.models import Firing, LlmStep
from agents.services import heartbeat
from agents.services.firings import firing_start
from conversations.store import conversation_key, load_conversation
from tests.agents.factories import assistant_with
from tests.chat.helpers import texts
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stop_check_that_hits_a_database_error_does_not_end_the_call(owner, inline, settings, monkeypatch):
    settings.AGENT_STOP_POLL_SECONDS = 0.0  # check on every streamed chunk
    monkeypatch.setenv("OFFLINE_PROVIDER_DELAY_MS", "5")
    checks = []

    def failing_check(firing_id):
        checks.append(firing_id)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(heartbeat, "stop_requested", failing_check)
    workflow, generation, ids = assistant_with(owner)
    firing = Firing.objects.get(
        pk=firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="a long answer " * 20
        )
    )
    assert checks, "the stream never asked whether to stop"
    assert firing.state == Firing.State.FINISHED and firing.end_reason == "answered"
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert texts(stored)[-1] == "I see 0 earlier messages. You said: " + "a long answer " * 20  # whole, not stopped


def test_a_stop_check_backs_off_while_the_database_is_down_then_sees_the_stop(settings, monkeypatch):
    settings.AGENT_STOP_POLL_SECONDS = 0.0
    monkeypatch.setattr(heartbeat, "_BACKOFF_FIRST_SECONDS", 0.05)
    answers = iter([OperationalError("down"), OperationalError("down"), True])
    asked = []

    def flaky(firing_id):
        asked.append(firing_id)
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(heartbeat, "stop_requested", flaky)
    should_stop = heartbeat.stop_checker("f")
    answers_given = []
    assert should_stop() is False  # error: not known, go on
    assert should_stop() is False and len(asked) == 1  # backing off: not even asked

    def stopped() -> bool:
        answers_given.append(should_stop())
        return answers_given[-1]

    # The database comes back (the third check) and the owner had pressed Stop: the stream sees it.
    wait_until(stopped, timeout=10, what="the stop to be seen")
    assert len(asked) == 3  # each try after the first backed off; no answer was "stop" before the real one
    assert answers_given.count(True) == 1


def test_while_the_database_is_down_a_stop_check_never_holds_up_the_stream(settings, monkeypatch):
    """A check on a database that is down waits for a connection (seconds, the pool's timeout); the stream that
    asks must not wait with it, so an answer goes on streaming through an outage."""
    settings.AGENT_STOP_POLL_SECONDS = 0.0
    release = threading.Event()
    calls = []
    streaming_thread = threading.current_thread()

    def down(firing_id):
        calls.append(threading.current_thread())
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")  # the pooled connection broke
        if threading.current_thread() is streaming_thread:
            release.set()  # waiting here would hold up the stream for the pool's timeout: the test fails below
            raise OperationalError("couldn't get a connection after 10.00 sec")
        release.wait(30)  # the next ones wait for a connection that does not come
        raise OperationalError("couldn't get a connection after 10.00 sec")

    monkeypatch.setattr(heartbeat, "stop_requested", down)
    should_stop = heartbeat.stop_checker("f")
    try:
        assert should_stop() is False
        wait_until(lambda: (should_stop() is False) and len(calls) >= 2, timeout=10, what="a check off the thread")
        # The check now hangs on its own thread; the stream's calls come straight back meanwhile.
        for _ in range(50):
            assert should_stop() is False
        assert not release.is_set() and len(calls) == 2  # still hanging: nothing above waited for it
        assert calls[1] is not streaming_thread
    finally:
        release.set()


def test_a_failed_heartbeat_write_does_not_end_the_heartbeat(owner, settings, monkeypatch):
    settings.AGENT_STEP_HEARTBEAT_SECONDS = 0.02
    workflow, generation, ids = assistant_with(owner)
    firing_id = firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    step = LlmStep.objects.create(firing_id=firing_id, iteration=99)
    beats_after_error = threading.Event()
    calls = []
    real_touch = heartbeat.touch_step

    def touch(step_id):
        calls.append(step_id)
        if len(calls) == 1:
            raise OperationalError("the database is restarting")
        real_touch(step_id)
        if len(calls) >= 3:
            beats_after_error.set()

    monkeypatch.setattr(heartbeat, "touch_step", touch)
    before = LlmStep.objects.get(pk=step.pk).heartbeat_at
    with heartbeat.StepHeartbeat(step.pk):
        assert beats_after_error.wait(timeout=10), "the heartbeat stopped after its first error"
    assert LlmStep.objects.get(pk=step.pk).heartbeat_at > before


def test_the_answer_is_saved_once_the_database_is_back(owner, inline, monkeypatch):
    real = heartbeat.retry_on_database_error
    failures = [2]

    def flaky_first_attempts(action, **kwargs):
        def attempt():
            if failures[0]:
                failures[0] -= 1
                raise OperationalError("connection refused")
            return action()

        return real(attempt, **kwargs)

    monkeypatch.setattr("agents.services.execute.retry_on_database_error", flaky_first_attempts)
    workflow, generation, ids = assistant_with(owner)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="are you there?")
    )
    assert failures == [0]
    assert firing.state == Firing.State.FINISHED
    assert LlmStep.objects.get(firing=firing).state == LlmStep.State.PERSISTED
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert texts(stored)[-1].endswith("are you there?")
