"""Idempotent changes: a retry with the same idempotency key returns the first result and sends nothing. The
receipt table's unique (namespace, key) makes the second of two concurrent retries roll back and return the first
result."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from django.db import IntegrityError, transaction

from core.errors import ServiceError

from .. import clock
from ..errors import invalid
from ..models import MemoryNamespace, MemoryReceipt


def _digest(operation: str, request: dict) -> str:
    return hashlib.sha256(json.dumps([operation, request], sort_keys=True, default=str).encode()).hexdigest()


def _replay(receipt: MemoryReceipt, digest: str) -> dict:
    if receipt.request_digest != digest:
        raise invalid(
            "This idempotency key was already used for a different change.",
            "Use a new key for a new change.",
            code="idempotency_key_reused",
        )
    return receipt.result


def _receipt(namespace: MemoryNamespace, key: str) -> MemoryReceipt | None:
    return MemoryReceipt.objects.filter(namespace=namespace, key=key).first()


def mutate_once(
    *, namespace: MemoryNamespace, idempotency_key: str | None, operation: str, request: dict, apply: Callable
) -> dict:
    """Run `apply()` (-> result dict) once per idempotency key; a replay returns the stored result and sends nothing.

    The receipt is not looked up first: a retry is rare, and the unique (namespace, key) of the receipt insert
    catches it. Its second `apply()` rolls back whole (events and tasks are on-commit, so nothing leaves), and the
    first call's receipt is the answer, also when the retry's `apply()` failed because the first one already
    happened (the item is gone, the version moved on, the namespace filled up).
    """
    key = (idempotency_key or "")[:255] or None
    digest = _digest(operation, request)
    try:
        with transaction.atomic():
            result = apply()
            if key:
                MemoryReceipt.objects.create(
                    namespace=namespace,
                    key=key,
                    operation=operation,
                    request_digest=digest,
                    result=result,
                    created_at=clock.now(),
                )
    except (IntegrityError, ServiceError):
        if key and (receipt := _receipt(namespace, key)):
            return _replay(receipt, digest)
        raise
    return result
