"""Writes of attached files: upload (checks, then bytes once by hash, then the row), the blocks a message holds,
and the orphan sweep. Every refusal comes before anything is stored.

Lock: a transaction-scoped advisory lock per hash (`_advisory_lock`) serializes an upload's row with the sweep
deleting that hash's bytes, so the sweep never deletes bytes a row relies on; an upload takes one per owner before
it (the quota). The bytes themselves are written with no lock held (an S3 put is a network call), and checked once
more after the row exists. They are taken with no row lock held, so they have no place in the row lock order of
docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .models import StoredFile
from .names import sanitize_name
from .references import referenced_files
from .selectors import owner_stored_bytes
from .sniffing import FileRefused, sniff_media_type
from .storage import bytes_delete, bytes_put, stored_hashes

logger = logging.getLogger("files")


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 100_000 else f"{max(1, round(size / 1000))} KB"


def _advisory_lock(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 32))", [name])


def _check_quota(*, owner, sha256: str, size: int, name: str) -> None:
    if StoredFile.objects.filter(owner=owner, sha256=sha256).exists():
        return  # the same bytes again take no more room
    used = owner_stored_bytes(owner=owner)
    if used + size > settings.FILE_OWNER_QUOTA_BYTES:
        raise FileRefused(
            "file_quota_exceeded",
            f"{name} does not fit: your files use {_megabytes(used)} of your "
            f"{_megabytes(settings.FILE_OWNER_QUOTA_BYTES)}. Clear a chat you no longer need: its files are removed "
            "within a day.",
            name=name,
            status=413,
        )


def file_upload(*, owner, name: str, data: bytes, claimed_type: str = "") -> StoredFile:
    """Check an upload (size, type from its bytes, the owner's quota), then keep its bytes once under their SHA-256
    and a row for this owner. Refused with FileRefused (naming the file) before anything is stored."""
    name = sanitize_name(name)
    if len(data) > settings.FILE_MAX_BYTES:
        raise FileRefused(
            "file_too_large",
            f"{name} is {_megabytes(len(data))}; a file may be at most {_megabytes(settings.FILE_MAX_BYTES)}.",
            name=name,
            status=413,
        )
    media_type = sniff_media_type(data, name=name, claimed=claimed_type)
    sha256 = hashlib.sha256(data).hexdigest()
    _check_quota(owner=owner, sha256=sha256, size=len(data), name=name)
    # The bytes go to storage with no lock held (an S3 put is a network call); the row comes after, under the locks.
    wrote = bytes_put(sha256, data)
    with transaction.atomic():
        # The owner's uploads one at a time (two at once could each fit the quota and together not), then the hash.
        _advisory_lock(f"files-owner:{owner.pk}")
        _advisory_lock(sha256)
        _check_quota(owner=owner, sha256=sha256, size=len(data), name=name)
        stored = StoredFile.objects.create(owner=owner, name=name, media_type=media_type, size=len(data), sha256=sha256)
    # A sweep may have deleted these bytes (a hash nothing named) between the put and the row; from the row on, no
    # sweep deletes them (it re-checks for rows under the hash's lock), so putting them back once now is enough.
    wrote = bytes_put(sha256, data) or wrote
    # Metadata only: never a byte or a line of the file's content (docs/security.md#files).
    logger.info(
        "file stored",
        extra={"file_id": stored.pk, "media_type": media_type, "size": len(data), "new_bytes": wrote},
    )
    return stored


def files_for_message(*, owner, file_ids: list) -> list[StoredFile]:
    """The owner's files `file_ids` (in that order) checked for one message: within the per-message caps. Another
    owner's id or an unknown one is refused like a missing file: nothing tells them apart."""
    if not file_ids:
        return []
    if len(file_ids) > settings.FILE_MESSAGE_MAX_FILES:
        raise FileRefused("too_many_files", f"A message may carry at most {settings.FILE_MESSAGE_MAX_FILES} files.")
    try:
        ids = [int(i) for i in file_ids]
    except (TypeError, ValueError):
        raise FileRefused("file_not_found", "A file of this message does not exist.") from None
    if len(set(ids)) != len(ids):
        raise FileRefused("invalid_request", "The same file is attached twice.")
    owner_id = getattr(owner, "pk", owner)  # a user or their id
    found = {f.pk: f for f in StoredFile.objects.filter(owner_id=owner_id, pk__in=ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise FileRefused(
            "file_not_found",
            f"File {missing[0]} does not exist (it may have been removed after a day unsent). Attach it again.",
            status=404,
        )
    total = sum(found[i].size for i in ids)
    if total > settings.FILE_MESSAGE_MAX_BYTES:
        raise FileRefused(
            "message_files_too_large",
            f"The files of one message may add up to {_megabytes(settings.FILE_MESSAGE_MAX_BYTES)}; these add up "
            f"to {_megabytes(total)}.",
            status=413,
        )
    return [found[i] for i in ids]


@dataclass(frozen=True)
class SweepReport:
    rows_removed: int
    hashes_removed: int


def files_sweep_orphans(*, now=None) -> SweepReport:
    """Remove the rows nothing refers to any more (uploaded more than FILE_ORPHAN_GRACE_SECONDS ago, so a file
    about to be sent is not taken), then the bytes of hashes no row names. Idempotent."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.FILE_ORPHAN_GRACE_SECONDS)
    candidates = list(
        StoredFile.objects.filter(created_at__lt=cutoff).values_list("pk", "owner_id", "sha256").order_by("pk")
    )
    referenced = referenced_files({sha256 for _, _, sha256 in candidates})
    orphans = {pk for pk, owner_id, sha256 in candidates if (owner_id, sha256) not in referenced}
    hashes = {sha256 for pk, _, sha256 in candidates if pk in orphans}
    removed_rows = StoredFile.objects.filter(pk__in=orphans).delete()[0] if orphans else 0
    # Bytes no row ever kept: an upload whose transaction rolled back after they were written.
    named = set(StoredFile.objects.values_list("sha256", flat=True).distinct())
    hashes.update(sha256 for sha256, written in stored_hashes() if sha256 not in named and written < cutoff)
    removed_hashes = 0
    for sha256 in sorted(hashes):
        with transaction.atomic():
            _advisory_lock(sha256)
            if StoredFile.objects.filter(sha256=sha256).exists():
                continue  # another owner's row, or an upload of the same bytes since the sweep began
            bytes_delete(sha256)
            removed_hashes += 1
    logger.info("files swept", extra={"rows_removed": removed_rows, "hashes_removed": removed_hashes})
    return SweepReport(removed_rows, removed_hashes)
