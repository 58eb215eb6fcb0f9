"""Expired items and old receipts, purged in batches by the housekeeping task."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction

from .. import clock
from ..locks import memory_items_expired_for_update
from ..models import MemoryNamespace, MemoryReceipt
from .items import delete_items


def memory_items_purge_expired(*, batch_size: int = 1000) -> int:
    """Delete expired items (they are already invisible to every read) and old receipts. -> items removed."""
    now = clock.now()
    removed = 0
    while True:
        with transaction.atomic():
            rows = memory_items_expired_for_update(now=now, limit=batch_size)
            if not rows:
                break
            by_namespace: dict[int, list[int]] = {}
            for namespace_id, item_id in rows:
                by_namespace.setdefault(namespace_id, []).append(item_id)
            for namespace in MemoryNamespace.objects.filter(pk__in=by_namespace):
                removed += delete_items(namespace, by_namespace[namespace.pk])
        if len(rows) < batch_size:
            break
    MemoryReceipt.objects.filter(created_at__lt=now - timedelta(hours=settings.MEMORY_RECEIPT_TTL_HOURS)).delete()
    return removed
