"""The chat watchdog ends runs nothing will finish: not_delivered, timed_out, interrupted, and runs whose firing
ended without the run hearing of it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import Firing
from chat.models import ChatRun
from chat.services import chat_message_send
from chat.watchdog import chat_watchdog_sweep
from tests.broker import hold_broker
from tests.chat.helpers import chat_workflow

pytestmark = pytest.mark.django_db(transaction=True)


def held_run(owner, monkeypatch, settings, *, age_seconds: int) -> ChatRun:
    hold_broker(monkeypatch, settings)
    workflow, _, _ = chat_workflow(owner)
    _, run, _ = chat_message_send(workflow=workflow, text="anyone there?")
    past = timezone.now() - timedelta(seconds=age_seconds)
    ChatRun.objects.filter(pk=run.pk).update(created_at=past, updated_at=past)
    Firing.objects.filter(pk=run.firing_id).update(created_at=past)
    return ChatRun.objects.get(pk=run.pk)


def test_a_run_no_worker_picked_up_ends_not_delivered_and_its_firing_is_stopped(owner, monkeypatch, settings):
    run = held_run(owner, monkeypatch, settings, age_seconds=settings.CHAT_RUN_DELIVERY_TIMEOUT_SECONDS + 5)
    assert chat_watchdog_sweep()["not_delivered"] == 1
    run.refresh_from_db()
    assert run.state == "error" and run.error_code == "not_delivered" and run.reply_message.status == "error"
    assert Firing.objects.get(pk=run.firing_id).state == "stopped"
    assert chat_watchdog_sweep() == {"from_firing": 0, "interrupted": 0, "not_delivered": 0, "timed_out": 0}


def test_a_run_past_every_limit_ends_timed_out(owner, monkeypatch, settings):
    run = held_run(owner, monkeypatch, settings, age_seconds=settings.CHAT_RUN_MAX_SECONDS + 5)
    Firing.objects.filter(pk=run.firing_id).update(state="running")
    assert chat_watchdog_sweep()["timed_out"] == 1
    run.refresh_from_db()
    assert run.state == "error" and run.error_code == "timed_out"


def test_a_run_whose_firing_is_gone_ends_interrupted(owner, monkeypatch, settings):
    run = held_run(owner, monkeypatch, settings, age_seconds=60)
    Firing.objects.filter(pk=run.firing_id).delete()
    assert chat_watchdog_sweep()["interrupted"] == 1
    run.refresh_from_db()
    assert run.state == "error" and run.error_code == "interrupted"


def test_a_firing_that_ended_without_telling_the_run_is_settled_from_its_state(owner, monkeypatch, settings):
    run = held_run(owner, monkeypatch, settings, age_seconds=60)
    Firing.objects.filter(pk=run.firing_id).update(
        state="failed", error_code="interrupted", finished_at=timezone.now() - timedelta(seconds=30)
    )
    assert chat_watchdog_sweep()["from_firing"] == 1
    run.refresh_from_db()
    assert run.state == "error" and run.error_code == "interrupted"


def test_a_young_pending_run_is_left_alone(owner, monkeypatch, settings):
    run = held_run(owner, monkeypatch, settings, age_seconds=30)
    assert not any(chat_watchdog_sweep().values())
    assert ChatRun.objects.get(pk=run.pk).state == "pending"
