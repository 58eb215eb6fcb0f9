from celery import shared_task
from django.conf import settings

from .outbox import archive_outbox_drain


@shared_task(name="workflows.drain_archive_outbox", queue=settings.CELERY_QUEUE_HOUSEKEEPING, ignore_result=True)
def drain_archive_outbox(row_ids: list[int] | None = None) -> int:
    """Idempotent: rows already done, or claimed by another worker, are skipped."""
    return archive_outbox_drain(row_ids=row_ids)
