"""Celery entry points: ids in, idempotent, no business flow."""

from celery import shared_task
from django.conf import settings

from .embedding import embed_items
from .services import memory_items_purge_expired


@shared_task(name="memory.embed_item", queue=settings.CELERY_QUEUE_HOUSEKEEPING, ignore_result=True)
def embed_item(item_id: int) -> str:
    return embed_items([item_id])[0]


@shared_task(name="memory.purge_expired", queue=settings.CELERY_QUEUE_HOUSEKEEPING, ignore_result=True)
def purge_expired() -> int:
    return memory_items_purge_expired()
