"""Ends chat runs nothing will finish (docs/chat.md#watchdog). The runtime's own watchdog fails lost firings and its
`ended`
hook finishes their runs; this covers the rest: a firing that ended without the run hearing of it, a firing row
that is gone, a run no worker started, a run past every limit. Each end is a locked re-check, so two sweeps (or a
sweep racing the real end) never end a run twice."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.selectors import approval_wait_seconds, firing_outcome
from agents.services.firings import firing_request_stop
from chat.locks import chat_run_for_update
from chat.models import ChatRun
from chat.services.runs import chat_run_finish, chat_run_finish_from_firing

logger = logging.getLogger("chat.watchdog")


def _end(run_id: int, decide) -> str | None:
    with transaction.atomic():
        run = chat_run_for_update(run_id)
        if run is None or not run.is_active:
            return None
        firing = firing_outcome(firing_id=run.firing_id) if run.firing_id else None
        outcome = decide(run, firing)
        if outcome is None:
            return None
        if outcome == "from_firing":
            chat_run_finish_from_firing(run, firing)
        else:
            chat_run_finish(run, state=ChatRun.State.ERROR, reply_status="error", error_code=outcome)
        return outcome


def chat_watchdog_sweep() -> dict:
    now = timezone.now()
    lost_grace = timedelta(seconds=settings.CHAT_RUN_LOST_GRACE_SECONDS)
    delivery = timedelta(seconds=settings.CHAT_RUN_DELIVERY_TIMEOUT_SECONDS)
    max_age = timedelta(seconds=settings.CHAT_RUN_MAX_SECONDS)
    report = {"from_firing": 0, "interrupted": 0, "not_delivered": 0, "timed_out": 0}

    def decide(run, firing):
        age = now - run.created_at
        if firing is None:
            return "interrupted" if age > lost_grace else None
        if firing.ended:
            # The firing ended but the run never heard (the hook failed): give the hook a moment, then settle.
            return "from_firing" if firing.finished_at and now - firing.finished_at > lost_grace else None
        if firing.queued and age > delivery:
            return "not_delivered"
        if firing.awaiting_approval:
            return None  # parked for the owner's decision: its own timeout (the runtime's watchdog) ends the wait
        if age > max_age and age - timedelta(seconds=approval_wait_seconds(firing_id=run.firing_id)) > max_age:
            return "timed_out"  # time spent waiting for the owner's decisions does not count
        return None

    candidates = ChatRun.objects.filter(state__in=ChatRun.ACTIVE_STATES, updated_at__lt=now - lost_grace)
    for run_id, firing_id in candidates.values_list("pk", "firing_id"):
        outcome = _end(run_id, decide)
        if outcome is None:
            continue
        report[outcome] += 1
        if outcome in ("not_delivered", "timed_out") and firing_id:
            firing_request_stop(firing_id=firing_id)  # the run is over; the firing must not answer into it
    if any(report.values()):
        logger.info("chat watchdog sweep", extra=report)
    return report
