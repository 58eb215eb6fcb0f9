"""Ends steps and firings nothing will finish, and restarts work whose task was lost.

Runs as the periodic task `agent.watchdog`. Every claim is a conditional update, so two
watchdogs (two beats by mistake, or a slow one overlapping the next) never double-record.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.dispatch import enqueue_step
from agents.models import Firing, LlmStep
from agents.services.firings import end_firing
from agents.usage import record_llm_usage

logger = logging.getLogger("agents.watchdog")


def _fail(firing_id, code: str, message: str) -> bool:
    with transaction.atomic():
        firing = Firing.objects.select_for_update().filter(pk=firing_id).first()
        if firing is None or firing.is_terminal:
            return False
        end_firing(firing, state=Firing.State.FAILED, error_code=code, error_message=message)
        return True


def _ambiguous_steps(now) -> int:
    """A step whose worker stopped beating was lost mid-call: record `ambiguous`, never call again."""
    cutoff = now - timedelta(seconds=settings.AGENT_STEP_LOST_AFTER_SECONDS)
    count = 0
    lost = LlmStep.objects.filter(state=LlmStep.State.STARTED, heartbeat_at__lt=cutoff)
    for step in lost.select_related("firing", "firing__workflow"):
        with transaction.atomic():
            claimed = LlmStep.objects.filter(pk=step.pk, state=LlmStep.State.STARTED, heartbeat_at__lt=cutoff).update(
                state=LlmStep.State.AMBIGUOUS, error_code="worker_lost", finished_at=now
            )
            if not claimed:
                continue
            record_llm_usage(step.firing, idempotency_key=f"llm-step:{step.pk}", kind="llm", outcome="ambiguous")
        _fail(step.firing_id, "interrupted", "The worker running this step was lost; the step was not retried.")
        count += 1
    return count


def _lost_persists(now) -> int:
    cutoff = now - timedelta(seconds=settings.AGENT_PERSIST_GRACE_SECONDS)
    steps = LlmStep.objects.filter(
        state=LlmStep.State.COMPLETED, finished_at__lt=cutoff, firing__state=Firing.State.RUNNING
    ).values_list("firing_id", "iteration")
    for firing_id, iteration in steps:
        with transaction.atomic():
            enqueue_step("agent.persist_turn", str(firing_id), iteration)
    return len(steps)


def _stalled_parents(now) -> int:
    cutoff = now - timedelta(seconds=settings.AGENT_PERSIST_GRACE_SECONDS)
    parents = Firing.objects.filter(state=Firing.State.WAITING, updated_at__lt=cutoff).exclude(
        children__state__in=[Firing.State.QUEUED, Firing.State.RUNNING, Firing.State.WAITING]
    )
    count = 0
    for firing_id, iteration in parents.values_list("pk", "iteration"):
        with transaction.atomic():
            enqueue_step("agent.persist_turn", str(firing_id), iteration)
        count += 1
    return count


def _undelivered(now) -> int:
    cutoff = now - timedelta(seconds=settings.AGENT_DELIVERY_TIMEOUT_SECONDS)
    count = 0
    for firing_id in Firing.objects.filter(state=Firing.State.QUEUED, created_at__lt=cutoff).values_list(
        "pk", flat=True
    ):
        count += _fail(firing_id, "not_delivered", "No worker picked this firing up in time.")
    return count


def _timed_out(now) -> int:
    cutoff = now - timedelta(seconds=settings.AGENT_TIMEOUT_GRACE_SECONDS)
    count = 0
    running = Firing.objects.filter(state__in=[Firing.State.RUNNING, Firing.State.WAITING], deadline_at__lt=cutoff)
    for firing_id in running.values_list("pk", flat=True):
        if LlmStep.objects.filter(firing_id=firing_id, state=LlmStep.State.STARTED).exists():
            continue  # a live call is still beating; the lost-step rule or the call itself ends it
        count += _fail(firing_id, "timed_out", "The firing ran past its time limit.")
    return count


def watchdog_sweep() -> dict:
    now = timezone.now()
    report = {
        "ambiguous": _ambiguous_steps(now),
        "requeued_persists": _lost_persists(now),
        "resumed_parents": _stalled_parents(now),
        "not_delivered": _undelivered(now),
        "timed_out": _timed_out(now),
    }
    if any(report.values()):
        logger.info("watchdog sweep", extra=report)
    return report
