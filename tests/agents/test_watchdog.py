"""The watchdog ends what nothing will finish, each exactly once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import Firing, LlmStep
from agents.services.firings import firing_start
from agents.services.watchdog import watchdog_sweep
from conversations.models import UsageRecord
from tests.agents.factories import assistant_with

pytestmark = pytest.mark.django_db(transaction=True)


def _queued_firing(owner, settings):
    settings.AGENT_EXECUTION_MODE = "celery"  # sent to a broker nobody listens to in this test
    workflow, generation, ids = assistant_with(owner)
    return Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )


def test_a_firing_no_worker_picked_up_ends_not_delivered(owner, settings):
    firing = _queued_firing(owner, settings)
    assert watchdog_sweep()["not_delivered"] == 0  # still young
    Firing.objects.filter(pk=firing.pk).update(created_at=timezone.now() - timedelta(hours=1))
    assert watchdog_sweep()["not_delivered"] == 1
    firing.refresh_from_db()
    assert firing.state == Firing.State.FAILED and firing.error_code == "not_delivered"
    assert watchdog_sweep()["not_delivered"] == 0  # once


def test_a_firing_past_its_deadline_ends_timed_out(owner, settings):
    firing = _queued_firing(owner, settings)
    Firing.objects.filter(pk=firing.pk).update(
        state=Firing.State.RUNNING, deadline_at=timezone.now() - timedelta(hours=1)
    )
    assert watchdog_sweep()["timed_out"] == 1
    firing.refresh_from_db()
    assert firing.error_code == "timed_out"


def test_a_silent_step_becomes_ambiguous_and_is_billed_once(owner, settings):
    firing = _queued_firing(owner, settings)
    Firing.objects.filter(pk=firing.pk).update(
        state=Firing.State.RUNNING, agent_config={"provider": "offline", "model": "offline-echo"}
    )
    step = LlmStep.objects.create(firing=firing, iteration=1)
    LlmStep.objects.filter(pk=step.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert watchdog_sweep()["ambiguous"] == 1
    assert watchdog_sweep()["ambiguous"] == 0
    step.refresh_from_db()
    firing.refresh_from_db()
    assert step.state == LlmStep.State.AMBIGUOUS and firing.error_code == "interrupted"
    assert UsageRecord.objects.filter(idempotency_key=f"llm-step:{step.pk}", outcome="ambiguous").count() == 1


def test_a_beating_step_is_left_alone(owner, settings):
    firing = _queued_firing(owner, settings)
    Firing.objects.filter(pk=firing.pk).update(state=Firing.State.RUNNING)
    LlmStep.objects.create(firing=firing, iteration=1)
    assert watchdog_sweep()["ambiguous"] == 0
    firing.refresh_from_db()
    assert firing.state == Firing.State.RUNNING


def test_after_a_database_outage_a_silent_step_gets_a_grace_before_it_is_lost(owner, settings):
    from django.core.cache import cache

    from agents.services.watchdog import SWEEP_BACK_KEY, SWEEP_SEEN_KEY

    firing = _queued_firing(owner, settings)
    Firing.objects.filter(pk=firing.pk).update(
        state=Firing.State.RUNNING, agent_config={"provider": "offline", "model": "offline-echo"}
    )
    step = LlmStep.objects.create(firing=firing, iteration=1)
    # The database was away for a minute: no sweep got through, and no heartbeat could be written either.
    cache.set(SWEEP_SEEN_KEY, timezone.now() - timedelta(minutes=1))
    LlmStep.objects.filter(pk=step.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=1))
    assert watchdog_sweep()["ambiguous"] == 0  # the live worker's next beat is due any moment
    assert watchdog_sweep()["ambiguous"] == 0
    step.refresh_from_db()
    assert step.state == LlmStep.State.STARTED
    # Still silent AGENT_STEP_LOST_AFTER_SECONDS after the sweeps came back: that worker is gone.
    cache.set(SWEEP_BACK_KEY, timezone.now() - timedelta(seconds=settings.AGENT_STEP_LOST_AFTER_SECONDS + 1))
    assert watchdog_sweep()["ambiguous"] == 1
    step.refresh_from_db()
    assert step.state == LlmStep.State.AMBIGUOUS


def test_sweeps_without_a_gap_judge_silence_at_once(owner, settings):
    firing = _queued_firing(owner, settings)
    Firing.objects.filter(pk=firing.pk).update(
        state=Firing.State.RUNNING, agent_config={"provider": "offline", "model": "offline-echo"}
    )
    assert watchdog_sweep()["ambiguous"] == 0  # a sweep that reached the database just now
    step = LlmStep.objects.create(firing=firing, iteration=1)
    LlmStep.objects.filter(pk=step.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert watchdog_sweep()["ambiguous"] == 1
