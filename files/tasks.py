"""Celery entry points: idempotent, no business flow."""

from celery import shared_task
from django.conf import settings

from .services import files_sweep_orphans


@shared_task(name="files.sweep_orphans", queue=settings.CELERY_QUEUE_HOUSEKEEPING, ignore_result=True)
def sweep_orphans() -> dict:
    report = files_sweep_orphans()
    return {"rows_removed": report.rows_removed, "hashes_removed": report.hashes_removed}
