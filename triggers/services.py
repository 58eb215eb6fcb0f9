"""Schedules and their fires (docs/triggers.md).

- Start, Stop and Reset keep a workflow's `Schedule` rows in step with its live generation (listeners, called
  under the workflow's row lock).
- The sweep (Celery beat, `triggers.sweep`) claims due schedules `SKIP LOCKED`, moves each one's next due time
  past now and records one fire, in one transaction: two sweeps, or a sweep after downtime, fire a due time once.
- Delivery (`triggers.fire_deliver`) hands a fire to the chat as a message in the owner's thread, through the
  same send a typed message takes, so the turn continues the answering agent's stored conversation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from chat.services import chat_message_send
from core.errors import ServiceError
from core.queueing import enqueue_task

from .cron import parse_schedule
from .locks import schedules_due_for_update, schedules_of_workflow_for_update
from .models import Schedule, TriggerFire
from .nodes import SCHEDULE_TRIGGER, render_message

logger = logging.getLogger("triggers")

FIRE_TASK = "triggers.fire_deliver"


def _schedule_of(row: Schedule):
    return parse_schedule(cron=row.cron or None, every_minutes=row.every_minutes, timezone=row.timezone)


def _skip_pending(*, workflow_id: int, code: str) -> int:
    return TriggerFire.objects.filter(workflow_id=workflow_id, state__in=TriggerFire.PENDING_STATES).update(
        state=TriggerFire.State.SKIPPED, error_code=code, updated_at=timezone.now()
    )


# --- lifecycle (listeners) ------------------------------------------------------------------------------------


def schedules_on_generation_start(*, workflow, generation, now: datetime | None = None) -> int:
    """A Start or Reset admitted `generation`: its schedule nodes get rows due from now; rows of nodes it no
    longer has go (with their history). Returns how many schedules run."""
    now = now or timezone.now()
    nodes = [
        n
        for n in (generation.graph or {}).get("nodes", [])
        if isinstance(n, dict) and n.get("type") == SCHEDULE_TRIGGER.type
    ]
    existing = {row.node_id: row for row in schedules_of_workflow_for_update(workflow_id=workflow.pk)}
    _skip_pending(workflow_id=workflow.pk, code="restarted")
    kept = set()
    for node in nodes:
        params = SCHEDULE_TRIGGER.params_model.model_validate(node.get("params") or {})
        cron = params.cron.strip()
        values = {
            "generation": generation.number,
            "name": params.name,
            "cron": cron,
            "every_minutes": None if cron else params.every_minutes,
            "timezone": params.timezone,
            "message": params.message,
            "anchor_at": now,
        }
        row = existing.get(node["id"])
        if row is None:
            row = Schedule(workflow=workflow, node_id=node["id"], **values)
            row.next_due_at = _schedule_of(row).next_after(now, anchor=now)
            Schedule.objects.bulk_create([row])
        else:
            for name, value in values.items():
                setattr(row, name, value)
            row.next_due_at = _schedule_of(row).next_after(now, anchor=now)
            row.save(update_fields=[*values, "next_due_at", "updated_at"])
        kept.add(node["id"])
    Schedule.objects.filter(workflow_id=workflow.pk).exclude(node_id__in=kept).delete()
    return len(kept)


def _pause(*, workflow_id: int, code: str) -> dict:
    rows = schedules_of_workflow_for_update(workflow_id=workflow_id)
    for row in rows:
        row.next_due_at = None
        row.save(update_fields=["next_due_at", "updated_at"])
    return {"schedules": len(rows), "dropped": _skip_pending(workflow_id=workflow_id, code=code)}


def schedules_on_generation_end(*, workflow, generation) -> dict:
    """Stop (or a Start that supersedes the generation): the schedules pause, their waiting turns are dropped."""
    return _pause(workflow_id=workflow.pk, code="stopped")


def schedules_on_reset(*, workflow, previous_generation, new_generation, actor) -> dict:
    """Reset clears the schedules' pending state; the new generation's start listener sets their next due time."""
    return _pause(workflow_id=workflow.pk, code="reset")


# --- the sweep --------------------------------------------------------------------------------------------------


@dataclass
class SweepResult:
    fired: list[int] = field(default_factory=list)  # fire ids handed to delivery
    skipped: list[int] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)


def schedules_sweep(*, now: datetime | None = None, limit: int | None = None) -> SweepResult:
    """Claim the due schedules and record one fire each; their next due time moves past `now` in the same
    transaction. A schedule that missed several due times (downtime) fires once, with `missed` saying how many
    more there were. A schedule whose previous turns still wait for a busy agent records a skipped fire.

    A handful of statements whatever the batch: the claim, the waiting turns' count, one UPDATE of the claimed
    rows and one INSERT of their fires."""
    now = now or timezone.now()
    limit = limit or settings.TRIGGERS_SWEEP_BATCH
    result = SweepResult()
    with transaction.atomic():
        rows = schedules_due_for_update(now=now, limit=limit)
        pending = dict(
            TriggerFire.objects.filter(schedule__in=rows, state__in=TriggerFire.PENDING_STATES)
            .values_list("schedule_id")
            .annotate(n=Count("id"))
        )
        fires = [_claim(row, now=now, pending=pending.get(row.pk, 0)) for row in rows]
        if rows:
            _save_claims(rows, fires, now=now)
            for pk, state in _insert_fires(fires):
                (result.fired if state == TriggerFire.State.QUEUED else result.skipped).append(pk)
        fired = list(result.fired)
        transaction.on_commit(lambda: [enqueue_task(FIRE_TASK, args=(pk,)) for pk in fired])
    # Turns that waited for a busy agent, and queued ones whose task was lost, are handed again (delivery is
    # idempotent: a fire hands over one message however often it is sent).
    stale = now - timedelta(seconds=settings.TRIGGERS_RESEND_AFTER_SECONDS)
    again = TriggerFire.objects.filter(
        Q(state=TriggerFire.State.WAITING) | Q(state=TriggerFire.State.QUEUED, updated_at__lt=stale)
    ).values_list("pk", flat=True)
    result.resent = sorted(set(again) - set(result.fired))
    for pk in result.resent:
        enqueue_task(FIRE_TASK, args=(pk,))
    return result


# Sent as arrays (one statement each, whatever the batch): Django's bulk_update builds a CASE per row and column,
# which costs more than the sweep's whole budget at a few hundred rows.
_SAVE_CLAIMS = f"""
UPDATE {Schedule._meta.db_table} AS s
   SET next_due_at = v.next_due_at, last_fired_at = %s, last_missed = v.missed, updated_at = %s
  FROM unnest(%s::bigint[], %s::timestamptz[], %s::integer[]) AS v(id, next_due_at, missed)
 WHERE s.id = v.id
"""
_INSERT_FIRES = f"""
INSERT INTO {TriggerFire._meta.db_table}
       (schedule_id, workflow_id, node_id, kind, name, due_at, missed, state, error_code, text, created_at, updated_at)
SELECT v.schedule_id, v.workflow_id, v.node_id, %s, v.name, v.due_at, v.missed, v.state, v.error_code, v.text, %s, %s
  FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::timestamptz[], %s::integer[], %s::text[],
              %s::text[], %s::text[])
       AS v(schedule_id, workflow_id, node_id, name, due_at, missed, state, error_code, text)
RETURNING id, state
"""


def _save_claims(rows: list[Schedule], fires: list[TriggerFire], *, now: datetime) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            _SAVE_CLAIMS,
            [now, timezone.now(), [r.pk for r in rows], [r.next_due_at for r in rows], [r.last_missed for r in rows]],
        )


def _insert_fires(fires: list[TriggerFire]) -> list[tuple[int, str]]:
    stamp = timezone.now()
    columns = ("schedule_id", "workflow_id", "node_id", "name", "due_at", "missed", "state", "error_code", "text")
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_FIRES,
            [TriggerFire.Kind.SCHEDULE, stamp, stamp, *([getattr(f, c) for f in fires] for c in columns)],
        )
        return sorted(cursor.fetchall())


def _claim(row: Schedule, *, now: datetime, pending: int) -> TriggerFire:
    """Move a claimed schedule past `now` (saved by the caller, with the others) and make its fire."""
    schedule = _schedule_of(row)
    due_at = row.next_due_at
    missed = max(0, schedule.due_between(due_at, now, anchor=row.anchor_at) - 1)
    row.next_due_at = schedule.next_after(now, anchor=row.anchor_at)
    row.last_fired_at = now
    row.last_missed = missed
    busy = pending >= settings.TRIGGERS_MAX_QUEUED_TURNS
    return TriggerFire(
        text=render_message(row.message, name=row.name, local=due_at.astimezone(schedule.tz), missed=missed),
        schedule=row,
        workflow_id=row.workflow_id,
        node_id=row.node_id,
        kind=TriggerFire.Kind.SCHEDULE,
        name=row.name,
        due_at=due_at,
        missed=missed,
        state=TriggerFire.State.SKIPPED if busy else TriggerFire.State.QUEUED,
        error_code="busy" if busy else "",
    )


# --- delivery ---------------------------------------------------------------------------------------------------


def _settle(fire: TriggerFire, *, state: str, error_code: str = "", chat_run_id: int | None = None) -> bool:
    """Move a pending fire to `state`; False when another delivery settled it first."""
    return bool(
        TriggerFire.objects.filter(pk=fire.pk, state__in=TriggerFire.PENDING_STATES).update(
            state=state, error_code=error_code, chat_run_id=chat_run_id, updated_at=timezone.now()
        )
    )


def fire_deliver(*, fire_id: int) -> TriggerFire | None:
    """Hand a pending fire to the owner's chat as a message marked with its trigger. Idempotent: the message is
    sent with the fire's own client id, so a second delivery finds the first message and run. A busy answering
    agent leaves the fire waiting for the next sweep."""
    fire = TriggerFire.objects.filter(pk=fire_id).select_related("schedule__workflow", "webhook__workflow").first()
    if fire is None or fire.state not in TriggerFire.PENDING_STATES:
        return fire
    workflow = (fire.schedule or fire.webhook).workflow
    mark = {"kind": fire.kind, "name": fire.name, "node_id": fire.node_id, "fire_id": fire.pk, "missed": fire.missed}
    try:
        _message, run, _created = chat_message_send(
            workflow=workflow,
            text=fire.text,
            client_message_id=f"trigger-fire:{fire.pk}",
            meta={"trigger": mark},
        )
    except ServiceError as exc:
        if exc.code in ("run_in_progress", "approval_pending"):  # busy (a card waiting too): try again later
            TriggerFire.objects.filter(pk=fire.pk, state=TriggerFire.State.QUEUED).update(
                state=TriggerFire.State.WAITING, updated_at=timezone.now()
            )
        else:
            _settle(fire, state=TriggerFire.State.FAILED, error_code=exc.code)
        fire.refresh_from_db()
        return fire
    _settle(fire, state=TriggerFire.State.FIRED, chat_run_id=run.pk)
    logger.info("trigger fired", extra={"fire_id": fire.pk, "run_id": run.pk, "workflow_id": fire.workflow_id})
    fire.refresh_from_db()
    return fire
