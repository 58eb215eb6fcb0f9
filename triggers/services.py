"""Schedules and their fires (docs/triggers.md).

- Start, Stop and Reset keep a workflow's `Schedule` rows in step with its live generation (listeners, called
  under the workflow's row lock).
- The sweep (Celery beat, `triggers.sweep`) claims due schedules `SKIP LOCKED`, moves each one's next due time
  past now and records one fire, in one transaction: two sweeps, or a sweep after downtime, fire a due time once.
- Delivery (`triggers.fire_deliver`) hands a fire to the chat as a message in the owner's thread, through the
  same send a typed message takes, so the turn continues the answering agent's stored conversation.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from chat.services import chat_message_send
from core.errors import ServiceError
from core.queueing import enqueue_task
from workflows.graph import trigger_turn_label

from .cron import Schedule as ScheduleTimes
from .cron import parse_schedule
from .locks import DueSchedule, schedules_due_for_update, schedules_of_workflow_for_update
from .models import Schedule, TriggerFire
from .nodes import SCHEDULE_TRIGGER, WEBHOOK_TRIGGER, render_message

logger = logging.getLogger("triggers")

FIRE_TASK = "triggers.fire_deliver"
_NODE_TYPE = {TriggerFire.Kind.SCHEDULE: SCHEDULE_TRIGGER.type, TriggerFire.Kind.WEBHOOK: WEBHOOK_TRIGGER.type}


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

    Two statements in the transaction whatever the batch: the claim (with each row's waiting turns), and one that
    moves the claimed rows forward and inserts their fires. The deliveries go on commit; the look for turns to
    hand again comes after it."""
    now = now or timezone.now()
    limit = limit or settings.TRIGGERS_SWEEP_BATCH
    result = SweepResult()
    with transaction.atomic():
        rows = schedules_due_for_update(now=now, limit=limit)
        if rows:
            schedules: dict[tuple, ScheduleTimes] = {}  # parsed once per distinct schedule, not once per row
            claims = [_claim(row, now=now, schedules=schedules) for row in rows]
            for pk, state in _record_claims(claims, now=now):
                (result.fired if state == TriggerFire.State.QUEUED else result.skipped).append(pk)
            fired = list(result.fired)
            transaction.on_commit(lambda: [enqueue_task(FIRE_TASK, args=(pk,)) for pk in fired])
    # Turns that waited for a busy agent, and queued ones whose task was lost, are handed again (delivery is
    # idempotent: a fire hands over one message however often it is sent).
    stale = now - timedelta(seconds=settings.TRIGGERS_RESEND_AFTER_SECONDS)
    with connection.cursor() as cursor:
        cursor.execute(_AGAIN, [stale])
        again = {pk for (pk,) in cursor.fetchall()}
    result.resent = sorted(again - set(result.fired))
    for pk in result.resent:
        enqueue_task(FIRE_TASK, args=(pk,))
    return result


_AGAIN = f"""
SELECT id FROM {TriggerFire._meta.db_table}
 WHERE state = '{TriggerFire.State.WAITING}' OR (state = '{TriggerFire.State.QUEUED}' AND updated_at < %s)
"""

# One statement, the claimed rows sent as arrays: Django's bulk_update builds a CASE per row and column, which
# costs more than the sweep's whole budget at a few hundred rows. The fires take the schedule's own columns from
# the UPDATE's RETURNING, so only what the sweep computed travels.
_RECORD_CLAIMS = f"""
WITH moved AS (
    UPDATE {Schedule._meta.db_table} AS s
       SET next_due_at = v.next_due_at, last_fired_at = %(now)s, last_missed = v.missed, updated_at = %(stamp)s
      FROM unnest(%(ids)s::bigint[], %(next)s::timestamptz[], %(due)s::timestamptz[], %(missed)s::integer[],
                  %(busy)s::boolean[], %(text)s::text[]) AS v(id, next_due_at, due_at, missed, busy, text)
     WHERE s.id = v.id
 RETURNING s.id, s.workflow_id, s.node_id, s.name, v.due_at, v.missed, v.busy, v.text
)
INSERT INTO {TriggerFire._meta.db_table}
       (schedule_id, workflow_id, node_id, kind, name, due_at, missed, state, error_code, text, created_at, updated_at)
SELECT id, workflow_id, node_id, '{TriggerFire.Kind.SCHEDULE}', name, due_at, missed,
       CASE WHEN busy THEN '{TriggerFire.State.SKIPPED}' ELSE '{TriggerFire.State.QUEUED}' END,
       CASE WHEN busy THEN 'busy' ELSE '' END, text, %(stamp)s, %(stamp)s
  FROM moved
RETURNING id, state
"""


class Claim(NamedTuple):
    pk: int
    next_due_at: datetime | None
    due_at: datetime
    missed: int
    busy: bool
    text: str


def _record_claims(claims: list[Claim], *, now: datetime) -> list[tuple[int, str]]:
    stamp = timezone.now()
    columns = zip(*claims, strict=True)
    params = dict(zip(("ids", "next", "due", "missed", "busy", "text"), map(list, columns), strict=True))
    with connection.cursor() as cursor:
        cursor.execute(_RECORD_CLAIMS, {**params, "now": now, "stamp": stamp})
        return sorted(cursor.fetchall())


def _claim(row: DueSchedule, *, now: datetime, schedules: dict) -> Claim:
    """Where a claimed schedule moves (its first due time after `now`) and the fire it records."""
    key = (row.cron, row.every_minutes, row.timezone)
    schedule = schedules.get(key)
    if schedule is None:
        schedule = schedules[key] = parse_schedule(
            cron=row.cron or None, every_minutes=row.every_minutes, timezone=row.timezone
        )
    due_at = row.next_due_at
    missed = max(0, schedule.due_between(due_at, now, anchor=row.anchor_at) - 1)
    return Claim(
        pk=row.pk,
        next_due_at=schedule.next_after(now, anchor=row.anchor_at),
        due_at=due_at,
        missed=missed,
        busy=row.pending >= settings.TRIGGERS_MAX_QUEUED_TURNS,
        text=render_message(row.message, name=row.name, local=due_at.astimezone(schedule.tz), missed=missed),
    )


# --- delivery ---------------------------------------------------------------------------------------------------


# A webhook delivery's two writes of its fire, as SQL built once (the ORM's query building was most of a
# delivery's CPU; bench/triggers.py).
@functools.cache
def _insert_sql() -> tuple[str, tuple]:
    fields = tuple(f for f in TriggerFire._meta.concrete_fields if not f.primary_key)
    columns = ", ".join(f'"{f.column}"' for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    return f'INSERT INTO "{TriggerFire._meta.db_table}" ({columns}) VALUES ({placeholders}) RETURNING "id"', fields


def fire_insert(fire: TriggerFire) -> None:
    """`fire.save(force_insert=True)`: one INSERT (the fields' `pre_save`, so `auto_now`, apply as in `save`)."""
    sql, fields = _insert_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [f.get_db_prep_save(f.pre_save(fire, True), connection) for f in fields])
        (fire.pk,) = cursor.fetchone()
    fire._state.adding = False
    fire._state.db = connection.alias


_SETTLE = f"""
UPDATE "{TriggerFire._meta.db_table}" SET state = %s, error_code = %s, chat_run_id = %s, updated_at = %s
 WHERE id = %s AND state IN ('{TriggerFire.State.QUEUED}', '{TriggerFire.State.WAITING}')
"""


def _settle(fire: TriggerFire, *, state: str, error_code: str = "", chat_run_id: int | None = None) -> None:
    """Move a pending fire to `state` (the instance too); when another delivery settled it first, the instance
    reads what that one wrote."""
    stamp = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_SETTLE, [state, error_code, chat_run_id, stamp, fire.pk])
        settled = cursor.rowcount
    if settled:
        fire.state, fire.error_code, fire.chat_run_id, fire.updated_at = state, error_code, chat_run_id, stamp
    else:
        fire.refresh_from_db()


def fire_deliver(*, fire_id: int) -> TriggerFire | None:
    """Hand a pending fire to the owner's chat as a message marked with its trigger. Idempotent: the message is
    sent with the fire's own client id, so a second delivery finds the first message and run. A busy answering
    agent leaves the fire waiting for the next sweep."""
    fire = TriggerFire.objects.filter(pk=fire_id).select_related("schedule__workflow", "webhook__workflow").first()
    if fire is None or fire.state not in TriggerFire.PENDING_STATES:
        return fire
    return fire_hand_over(fire, workflow=(fire.schedule or fire.webhook).workflow)


def fire_hand_over(fire: TriggerFire, *, workflow) -> TriggerFire:
    """`fire_deliver` for a pending fire the caller holds, with its workflow (a webhook delivery hands over the
    fire it just recorded, in the same transaction: no second read, one commit)."""
    node = {"type": _NODE_TYPE[fire.kind], "id": fire.node_id, "params": {"name": fire.name}}
    mark = {
        "kind": fire.kind,
        "name": fire.name,
        "label": trigger_turn_label(node),  # "Scheduled: morning summary": the run history names the trigger
        "node_id": fire.node_id,
        "fire_id": fire.pk,
        "missed": fire.missed,
    }
    try:
        _message, run, _created = chat_message_send(
            workflow=workflow,
            text=fire.text,
            client_message_id=f"trigger-fire:{fire.pk}",
            meta={"trigger": mark},
        )
    except ServiceError as exc:
        if exc.code not in ("run_in_progress", "approval_pending"):  # busy (a card waiting too): try again later
            _settle(fire, state=TriggerFire.State.FAILED, error_code=exc.code)
        elif TriggerFire.objects.filter(pk=fire.pk, state=TriggerFire.State.QUEUED).update(
            state=TriggerFire.State.WAITING, updated_at=timezone.now()
        ):
            fire.state = TriggerFire.State.WAITING
        else:
            fire.refresh_from_db()
        return fire
    _settle(fire, state=TriggerFire.State.FIRED, chat_run_id=run.pk)
    logger.info("trigger fired", extra={"fire_id": fire.pk, "run_id": run.pk, "workflow_id": fire.workflow_id})
    return fire
