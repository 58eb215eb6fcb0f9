"""The archive outbox: rows written with the change that needs them, drained by a Celery task.

Claiming is a conditional update (`filter(state=pending).update(...) == 1`), so two drains never process one
row; a row whose worker died is offered again after WORKFLOW_ARCHIVE_CLAIM_TIMEOUT_S. Listeners are idempotent,
so processing a row twice (a retry after a crash between listener and done-mark) is harmless.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core.queueing import enqueue_task

from .listeners import archive_listeners
from .models import ArchiveOutbox, Workflow

logger = logging.getLogger(__name__)


def archive_outbox_write(*, workflow_id: int, reason: str, context_node_ids=(), agent_node_ids=()) -> ArchiveOutbox:
    """Write a row in the caller's transaction and enqueue the drain once it commits."""
    row = ArchiveOutbox.objects.create(
        workflow_id=workflow_id,
        reason=reason,
        payload={"context_node_ids": sorted(set(context_node_ids)), "agent_node_ids": sorted(set(agent_node_ids))},
    )
    row_id = row.pk
    transaction.on_commit(lambda: _enqueue(row_id))
    return row


def _enqueue(row_id: int) -> None:
    try:
        enqueue_task(
            "workflows.drain_archive_outbox", kwargs={"row_ids": [row_id]}, queue=settings.CELERY_QUEUE_HOUSEKEEPING
        )
    except Exception:
        # The row is durable; the periodic drain picks it up when the broker is back.
        logger.warning("archive outbox enqueue failed", extra={"archive_row_id": row_id})


def _claimable(now):
    stale = now - timedelta(seconds=settings.WORKFLOW_ARCHIVE_CLAIM_TIMEOUT_S)
    return Q(state=ArchiveOutbox.State.PENDING) | Q(state=ArchiveOutbox.State.PROCESSING, claimed_at__lt=stale)


def _jsonable(value):
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def archive_outbox_process(*, row_id: int) -> bool:
    """Process one row if it can be claimed. True when this call completed it."""
    now = timezone.now()
    claimed = ArchiveOutbox.objects.filter(
        _claimable(now), pk=row_id, attempts__lt=settings.WORKFLOW_ARCHIVE_MAX_ATTEMPTS
    ).update(state=ArchiveOutbox.State.PROCESSING, claimed_at=now, attempts=F("attempts") + 1)
    if claimed != 1:
        return False
    row = ArchiveOutbox.objects.get(pk=row_id)
    workflow = Workflow.objects.filter(pk=row.workflow_id).first()
    try:
        with transaction.atomic():
            results = {}
            for name, listener in archive_listeners().items():
                results[name] = _jsonable(
                    listener(
                        workflow_id=row.workflow_id,
                        workflow=workflow,
                        reason=row.reason,
                        context_node_ids=list(row.payload.get("context_node_ids", [])),
                        agent_node_ids=list(row.payload.get("agent_node_ids", [])),
                    )
                )
            row.state = ArchiveOutbox.State.DONE
            row.result = results
            row.processed_at = timezone.now()
            row.last_error = ""
            row.save(update_fields=["state", "result", "processed_at", "last_error"])
    except Exception as exc:
        row.refresh_from_db(fields=["attempts"])
        out_of_attempts = row.attempts >= settings.WORKFLOW_ARCHIVE_MAX_ATTEMPTS
        row.state = ArchiveOutbox.State.FAILED if out_of_attempts else ArchiveOutbox.State.PENDING
        row.last_error = f"{type(exc).__name__}: {exc}"[:1000]
        row.save(update_fields=["state", "last_error"])
        logger.exception("archive outbox row failed", extra={"archive_row_id": row_id, "workflow_id": row.workflow_id})
        return False
    return True


def archive_outbox_drain(*, row_ids: list[int] | None = None, limit: int = 200) -> int:
    """Process the given rows, or every claimable row (oldest first). Returns how many this call completed."""
    if row_ids is None:
        row_ids = list(
            ArchiveOutbox.objects.filter(
                _claimable(timezone.now()), attempts__lt=settings.WORKFLOW_ARCHIVE_MAX_ATTEMPTS
            )
            .order_by("id")
            .values_list("id", flat=True)[:limit]
        )
    return sum(1 for row_id in row_ids if archive_outbox_process(row_id=row_id))
