"""Ends steps and firings nothing will finish, and restarts work whose task was lost.

Runs as the periodic task `agent.watchdog`. Every claim is a conditional update, so two
watchdogs (two beats by mistake, or a slow one overlapping the next) never double-record.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from agents.dispatch import enqueue_step
from agents.locks import firing_for_update
from agents.models import Firing, LlmStep, ToolApproval
from agents.services.approval_decisions import tool_approvals_expire
from agents.services.compaction import compaction_lost_resume
from agents.services.firings import firing_end
from agents.usage import record_llm_usage

logger = logging.getLogger("agents.watchdog")


def _fail(firing_id, code: str, message: str) -> bool:
    with transaction.atomic():
        firing = firing_for_update(firing_id)
        if firing is None or firing.is_terminal:
            return False
        firing_end(firing, state=Firing.State.FAILED, error_code=code, error_message=message)
        return True


# When a sweep last reached the database, and when sweeps came back after a gap (both in the cache, shared by every
# housekeeping worker). A gap means the database (or beat) was away; the heartbeats were silenced with it.
SWEEP_SEEN_KEY = "agents:watchdog:seen"
SWEEP_BACK_KEY = "agents:watchdog:back"


def _healthy_since(now):
    """Since when the watchdog has been reaching the database without a gap (None: as far as it knows, always).

    A step's heartbeat cannot be written while the database is down, so after an outage every live step looks silent
    for as long as the outage lasted (and a pooled connection takes a moment more to come back). Silence is judged
    only over time the database was reachable: after a gap longer than three sweeps (6 s at least), no step is taken for
    lost until AGENT_STEP_LOST_AFTER_SECONDS have passed since the sweeps came back. A dead worker is then found that
    much later; a live step is never ended `interrupted` by a database restart."""
    interval = settings.CELERY_BEAT_SCHEDULE["agent-watchdog"]["schedule"].total_seconds()
    try:
        known = cache.get_many([SWEEP_SEEN_KEY, SWEEP_BACK_KEY])
        seen, back = known.get(SWEEP_SEEN_KEY), known.get(SWEEP_BACK_KEY)
        if seen is not None and (now - seen).total_seconds() > max(3 * interval, 6.0):
            back = now
            cache.set(SWEEP_BACK_KEY, back, timeout=24 * 3600)
            logger.warning("watchdog: no sweep reached the database for %.0f s", (now - seen).total_seconds())
    except Exception:  # the cache is Redis: without it, judge as before
        return None
    return back


def _mark_seen(now) -> None:
    """Called once a sweep went through: it reached the database at `now`."""
    with contextlib.suppress(Exception):  # the cache is Redis: without it, the next sweep judges as before
        cache.set(SWEEP_SEEN_KEY, now, timeout=24 * 3600)


def _silent_before(now):
    """Work whose heartbeat is older than this was lost with its worker; None right after an outage, when it is too
    soon to tell a dead worker from one whose beats could not be written (`_healthy_since`)."""
    lost_after = timedelta(seconds=settings.AGENT_STEP_LOST_AFTER_SECONDS)
    back = _healthy_since(now)
    if back is not None and now - back < lost_after:
        return None
    return now - lost_after


def _ambiguous_steps(now) -> int:
    """A step whose worker stopped beating was lost mid-call: record `ambiguous`, never call again."""
    cutoff = _silent_before(now)
    if cutoff is None:
        return 0
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


def _lost_compactions(now) -> int:
    """A firing waiting for its compaction whose beat went silent: the compaction was lost with its worker (a late
    acknowledged task comes back only after the broker's visibility timeout, an hour), or its task never arrived.
    The firing continues from the stored list as it is (`compaction_lost_resume`); without this it waited for its
    deadline. Silence is judged as for steps (healthy time only, AGENT_STEP_LOST_AFTER_SECONDS)."""
    cutoff = _silent_before(now)
    if cutoff is None:
        return 0
    silent = Firing.objects.filter(state=Firing.State.RUNNING, compaction_pending=True, updated_at__lt=cutoff)
    firing_ids = silent.values_list("pk", flat=True)
    return sum(compaction_lost_resume(firing_id, silent_before=cutoff) for firing_id in firing_ids)


def _lost_persists(now) -> int:
    cutoff = now - timedelta(seconds=settings.AGENT_PERSIST_GRACE_SECONDS)
    steps = LlmStep.objects.filter(
        state=LlmStep.State.COMPLETED, finished_at__lt=cutoff, firing__state=Firing.State.RUNNING
    ).values_list("firing_id", "iteration")
    for firing_id, iteration in steps:
        with transaction.atomic():
            enqueue_step("agent.persist_turn", str(firing_id), iteration)
    return len(steps)


def _unstarted_steps(now) -> int:
    """A running firing whose next step nobody claimed: its continuation was lost with the worker process.

    Steps continue in the worker that committed the previous one (agents.dispatch.continue_step); a process lost
    between that commit and the next step's claim leaves the firing `running` at iteration n with no step n+1.
    Sending `agent.execute_llm_step(n + 1)` is safe however many times it happens: it claims `LlmStep(firing,
    n + 1)` before any provider call, and refuses while a compaction is pending or once the firing moved on.
    """
    cutoff = now - timedelta(seconds=settings.AGENT_PERSIST_GRACE_SECONDS)
    next_step = LlmStep.objects.filter(firing=OuterRef("pk"), iteration__gt=OuterRef("iteration"))
    stalled = Firing.objects.filter(state=Firing.State.RUNNING, compaction_pending=False, updated_at__lt=cutoff).filter(
        ~Exists(next_step)
    )
    count = 0
    for firing_id, iteration in stalled.values_list("pk", "iteration"):
        count += _resend_once_per_grace(firing_id, cutoff, now, "agent.execute_llm_step", str(firing_id), iteration + 1)
    return count


def _unprepared(now) -> int:
    """A queued firing nothing touched for a grace period: its `agent.prepare_payload` was lost with a worker.

    Prepare is acknowledged early (its worker goes on to run the firing's steps, see agents/tasks.py); it is
    idempotent (it works only on a `queued` firing, under the firing's lock), so sending it again is safe. A
    firing waiting for its conversation's lease touches its row on every retry and is left alone. The grace is short
    (AGENT_QUEUED_RESEND_SECONDS): a broker that restarted empty lost every queued turn's message, while the
    firings are safe in PostgreSQL, so they are sent again within seconds instead of failing `not_delivered`.
    """
    cutoff = now - timedelta(seconds=settings.AGENT_QUEUED_RESEND_SECONDS)
    count = 0
    for firing_id in Firing.objects.filter(state=Firing.State.QUEUED, updated_at__lt=cutoff).values_list(
        "pk", flat=True
    ):
        count += _resend_once_per_grace(firing_id, cutoff, now, "agent.prepare_payload", str(firing_id))
    return count


def _resend_once_per_grace(firing_id, cutoff, now, task_name: str, *args) -> int:
    # Claimed by touching the row: two watchdogs, or a backlog longer than the grace period, send it once a period.
    with transaction.atomic():
        if not Firing.objects.filter(pk=firing_id, updated_at__lt=cutoff).update(updated_at=now):
            return 0
        enqueue_step(task_name, *args)
    return 1


def _decided_parked(now) -> int:
    """A parked firing none of whose calls waits any more: the decisions (or the timeout) were committed, but the
    persist their commit sent was lost (a web process killed right after it, a broker that restarted empty). Sent
    again once per grace period; persist makes an approved call once (recorded `started` first) and never again."""
    cutoff = now - timedelta(seconds=settings.AGENT_PERSIST_GRACE_SECONDS)
    step_approvals = ToolApproval.objects.filter(firing=OuterRef("pk"), iteration=OuterRef("iteration"))
    waiting = step_approvals.filter(state=ToolApproval.State.PENDING)
    just_decided = step_approvals.filter(decided_at__gte=cutoff)  # its own persist is on its way
    decided = Firing.objects.filter(state=Firing.State.AWAITING_APPROVAL, updated_at__lt=cutoff).filter(
        ~Exists(waiting), ~Exists(just_decided)
    )
    count = 0
    for firing_id, iteration in decided.values_list("pk", "iteration"):
        count += _resend_once_per_grace(firing_id, cutoff, now, "agent.persist_turn", str(firing_id), iteration)
    return count


_WORKING = [Firing.State.QUEUED, Firing.State.RUNNING, Firing.State.WAITING, Firing.State.AWAITING_APPROVAL]


def _stalled_parents(now) -> int:
    cutoff = now - timedelta(seconds=settings.AGENT_PERSIST_GRACE_SECONDS)
    parents = Firing.objects.filter(state=Firing.State.WAITING, updated_at__lt=cutoff).exclude(
        children__state__in=_WORKING
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
    running = Firing.objects.filter(
        state__in=[Firing.State.RUNNING, Firing.State.WAITING], deadline_at__lt=cutoff
    ).exclude(children__state=Firing.State.AWAITING_APPROVAL)  # waiting for a teammate that waits for the owner
    for firing_id in running.values_list("pk", flat=True):
        if LlmStep.objects.filter(firing_id=firing_id, state=LlmStep.State.STARTED).exists():
            continue  # a live call is still beating; the lost-step rule or the call itself ends it
        count += _fail(firing_id, "timed_out", "The firing ran past its time limit.")
    return count


def watchdog_sweep() -> dict:
    now = timezone.now()
    report = {
        "ambiguous": _ambiguous_steps(now),
        "resumed_after_lost_compactions": _lost_compactions(now),
        "requeued_persists": _lost_persists(now),
        "restarted_steps": _unstarted_steps(now),
        "resent_prepares": _unprepared(now),
        "resumed_parents": _stalled_parents(now),
        "approvals_expired": tool_approvals_expire(now=now),
        "resumed_after_decisions": _decided_parked(now),
        "not_delivered": _undelivered(now),
        "timed_out": _timed_out(now),
    }
    _mark_seen(now)
    if any(report.values()):
        logger.info("watchdog sweep", extra=report)
    return report
