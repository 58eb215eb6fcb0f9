"""Opaque keyset cursors: a signed (position, query digest), never an offset.

A cursor only continues the listing it came from; the digest binds it to the namespace, query and filters.
"""

from __future__ import annotations

import hashlib
import json

from django.core import signing

from .errors import invalid

_SALT = "memory.cursor.v1"


def listing_digest(**parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def encode_cursor(*, kind: str, digest: str, last_id: int, score: float | None = None) -> str:
    payload = {"k": kind, "d": digest, "i": int(last_id)}
    if score is not None:
        payload["s"] = float(score).hex()  # exact round trip of the float the keyset compares against
    return signing.dumps(payload, salt=_SALT, compress=False)


def decode_cursor(cursor, *, digest: str) -> dict | None:
    if cursor in (None, ""):
        return None
    bad = invalid(
        "cursor is not valid for this listing.",
        "Pass the next_cursor from the previous page of the same query, or leave cursor out to start over.",
        code="invalid_cursor",
    )
    if not isinstance(cursor, str) or len(cursor) > 500:
        raise bad
    try:
        payload = signing.loads(cursor, salt=_SALT)
    except signing.BadSignature:
        raise bad from None
    if not isinstance(payload, dict) or payload.get("d") != digest:
        raise bad
    try:
        position = {"kind": payload["k"], "last_id": int(payload["i"])}
        if "s" in payload:
            position["score"] = float.fromhex(payload["s"])
    except (KeyError, TypeError, ValueError):
        raise bad from None
    return position
