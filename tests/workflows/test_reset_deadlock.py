"""Workflow Reset against a concurrent prepare (docs/architecture.md#reset-deadlock).

Reset takes the chat run before the firing; prepare takes the firing, then (its chat hook) the run. The test
forces that interleaving exactly: the reset has locked the run and is about to take the firing when a competing
transaction, shaped like prepare, takes the firing and then asks for the run. PostgreSQL aborts the reset (it began
waiting first, so its deadlock check runs first); the reset is tried again and succeeds, or, when it may not try
again, answers 409 `reset_busy` and changes nothing.
"""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from agents.locks import firing_for_update
from agents.models import Firing
from chat.locks import chat_run_for_update
from chat.models import ChatRun
from chat.services import chat_message_send
from tests.broker import hold_broker
from tests.chat.helpers import chat_workflow
from tests.race import Competitor, backend_pid, run_before, wait_until_waiting_on_a_lock
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def _pending_run(owner, monkeypatch, settings):
    hold_broker(monkeypatch, settings)  # the firing stays queued: no worker prepares it but the competitor
    workflow, generation, _ = chat_workflow(owner)
    _, run, _ = chat_message_send(workflow=workflow, text="hello")
    assert run.firing_id is not None and run.is_active
    return workflow, generation, run


def _prepare_like_competitor_when_reset_takes_the_firing():
    """A hook for `firing_request_stop`: when the reset (holding the run) is about to lock the firing, a prepare-
    shaped transaction takes the firing first, waits until the reset queues behind it, then asks for the run."""
    competitors: list[Competitor] = []

    def compete(*, firing_id):
        reset_pid = backend_pid()
        holding = threading.Event()
        run_id = Firing.objects.filter(pk=firing_id).values_list("chat_run_id", flat=True).get()

        def prepare_like():
            with transaction.atomic():
                firing_for_update(firing_id)  # prepare's first lock
                holding.set()
                wait_until_waiting_on_a_lock(pid=reset_pid)  # the reset now waits for this firing
                chat_run_for_update(run_id)  # the chat hook's lock: the reset holds it -> deadlock
            return "prepared"

        competitors.append(Competitor(prepare_like, name="prepare").start())
        assert holding.wait(20), "the competitor never took the firing"

    return compete, competitors


def test_a_reset_that_deadlocks_with_a_prepare_is_tried_again_and_succeeds(owner, owner_client, monkeypatch, settings):
    workflow, generation, run = _pending_run(owner, monkeypatch, settings)
    compete, competitors = _prepare_like_competitor_when_reset_takes_the_firing()
    attempts = []
    with (
        run_before("chat.services.clearing.firing_request_stop", compete),
        run_before("workflows.services.reset._reset_attempt", lambda **kw: attempts.append(1), once=False),
    ):
        response = owner_client.post(f"/api/workflows/{workflow.pk}/reset/", {}, format="json")
    assert competitors[0].result() == "prepared"  # the prepare went on once the aborted attempt let go
    assert response.status_code == 200, response.content
    assert len(attempts) == 2  # the first attempt deadlocked and was rolled back whole; the second went through
    assert response.json()["generation"]["number"] == generation + 1
    assert not ChatRun.objects.filter(pk=run.pk).exists()  # the reset cleared the chat thread
    assert Firing.objects.get(pk=run.firing_id).state in Firing.TERMINAL_STATES


def test_a_reset_that_may_not_try_again_answers_409_reset_busy_and_changes_nothing(
    owner, owner_client, monkeypatch, settings
):
    settings.WORKFLOW_RESET_DEADLOCK_RETRIES = 0
    workflow, generation, run = _pending_run(owner, monkeypatch, settings)
    compete, competitors = _prepare_like_competitor_when_reset_takes_the_firing()
    with run_before("chat.services.clearing.firing_request_stop", compete):
        response = owner_client.post(f"/api/workflows/{workflow.pk}/reset/", {}, format="json")
    assert competitors[0].result() == "prepared"
    assert response.status_code == 409 and response["Retry-After"] == "1"
    body = response.json()
    assert body["code"] == "reset_busy" and body["retry"] is True and body["message"]
    assert Workflow.objects.get(pk=workflow.pk).live_generation == generation  # nothing was reset
    run.refresh_from_db()
    assert run.is_active and run.error_code == ""
    assert Firing.objects.get(pk=run.firing_id).state == Firing.State.QUEUED
