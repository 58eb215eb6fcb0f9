"""`Idempotency-Key` on owner actions that start work (send, edit, try again, switch, Start, Reset).

A client that may send an action twice (a double click, a retry after a timeout or a 503) sends the same key each
time; the first request does the work and its answer is kept, and every later request with that key gets the same
status and body back (header `Idempotency-Replayed: true`) and starts nothing.

How it holds under races: the receipt row is inserted first, inside the transaction that then runs the action, and
committed with it. A second request with the same key blocks on the unique index until the first commits, then
finds the receipt and replays it; if the first rolled back (an error, a 5xx), the second runs the action itself.
A key reused for a different request (another path or body) answers 409 `idempotency_key_reused`. Only answers
that did something (2xx) are kept: a refusal (4xx) or failure (5xx) started nothing, so its retry is judged afresh.
Receipts are kept IDEMPOTENCY_RECEIPT_TTL_HOURS (the housekeeping queue purges older ones).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import APIException
from rest_framework.response import Response

from core.errors import ConflictError, ServiceError

HEADER = "Idempotency-Key"
KEY_PATTERN = r"^[A-Za-z0-9_.:\-]{1,200}$"
_KEY_RE = re.compile(KEY_PATTERN)

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    required=False,
    pattern=KEY_PATTERN,
    description="Optional. Send the same key when retrying this action: the first request starts the work, every "
    "later one with the key answers the first result again (header `Idempotency-Replayed: true`) and starts "
    "nothing. The same key for a different request is a 409 `idempotency_key_reused`. Letters, digits and `_.:-`, "
    "at most 200 characters (a UUID is a good key).",
)


def _part(value):
    """An uploaded file counts by its bytes (a multipart upload): the same key with other bytes is another request."""
    if hasattr(value, "chunks"):
        digest = hashlib.sha256()
        for chunk in value.chunks():
            digest.update(chunk)
        value.seek(0)
        return f"file:{value.name}:{digest.hexdigest()}"
    return str(value)


def _fingerprint(request) -> str:
    body = json.dumps(request.data, sort_keys=True, cls=DjangoJSONEncoder, default=_part)
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def _claim(user_id: int, key: str, fingerprint: str) -> bool:
    # INSERT ... ON CONFLICT DO NOTHING waits for a concurrent uncommitted insert of the same key, so exactly one
    # of two racing requests claims it; the other sees the winner's committed receipt.
    from core.models import IdempotencyReceipt

    table = IdempotencyReceipt._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (user_id, key, fingerprint, status_code, body, created_at) "  # noqa: S608
            "VALUES (%s, %s, %s, 0, NULL, now()) ON CONFLICT (user_id, key) DO NOTHING RETURNING id",
            [user_id, key, fingerprint],
        )
        return cursor.fetchone() is not None


def _replay(receipt) -> Response:
    response = Response(receipt.body, status=receipt.status_code)
    response["Idempotency-Replayed"] = "true"
    return response


def _refuse_after_view_checks(view, handler, request, args, kwargs, error: Exception):
    """Refuse a request whose key (or body) cannot be used, but only after the view's own checks: a stranger must
    still get the 404 that ownership gives before any input is looked at. The action runs in a transaction that is
    always rolled back (its on-commit work, such as starting a run, is dropped with it), so nothing starts."""
    with transaction.atomic():
        try:
            response = handler(view, request, *args, **kwargs)
        except Exception as exc:
            response = view.handle_exception(exc)
        transaction.set_rollback(True)
    if response.status_code >= 400:
        return response
    raise error


def idempotent(handler):
    """Decorate an APIView `post`; requests without the header run as before."""

    @functools.wraps(handler)
    def wrapped(self, request, *args, **kwargs):
        key = request.headers.get(HEADER)
        if key is None or not request.user.is_authenticated:
            return handler(self, request, *args, **kwargs)
        from core.models import IdempotencyReceipt

        if not _KEY_RE.match(key):
            error = ServiceError("invalid_idempotency_key", f"{HEADER} is 1-200 letters, digits or `_.:-`.")
            return _refuse_after_view_checks(self, handler, request, args, kwargs, error)
        try:
            fingerprint = _fingerprint(request)
        except APIException as error:  # an unparsable body: the view says 404 or 415 in its own order
            return _refuse_after_view_checks(self, handler, request, args, kwargs, error)
        with transaction.atomic():
            if not _claim(request.user.pk, key, fingerprint):
                receipt = IdempotencyReceipt.objects.get(user=request.user, key=key)
                if receipt.fingerprint != fingerprint:
                    raise ConflictError(
                        "idempotency_key_reused", f"This {HEADER} was already used for a different request."
                    )
                return _replay(receipt)
            try:
                with transaction.atomic():  # a failed action rolls back to here, the receipt insert survives
                    response = handler(self, request, *args, **kwargs)
            except Exception as exc:
                response = self.handle_exception(exc)  # re-raises what is not an API error (an outage: no receipt)
            if response.status_code >= 400:
                # A refusal or failure started nothing and keeps nothing: a retry with the key is judged afresh (and
                # a stranger's 404 leaves no receipt behind).
                transaction.set_rollback(True)
                return response
            body = json.loads(json.dumps(response.data, cls=DjangoJSONEncoder))
            IdempotencyReceipt.objects.filter(user=request.user, key=key).update(
                status_code=response.status_code, body=body
            )
            return response

    return extend_schema(parameters=[IDEMPOTENCY_KEY_PARAMETER])(wrapped)
