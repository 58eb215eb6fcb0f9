"""Reads of attached files."""

from __future__ import annotations

from django.db import connection

from core.errors import NotFoundError

from .models import StoredFile


def owner_stored_bytes(*, owner) -> int:
    """What the owner's files take against their quota: each distinct file (hash) counted once."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COALESCE(SUM(size), 0) FROM (SELECT DISTINCT sha256, size FROM {StoredFile._meta.db_table} "
            "WHERE owner_id = %s) AS distinct_files",
            [owner.pk],
        )
        return int(cursor.fetchone()[0])


def file_of_owner(*, owner, file_id) -> StoredFile:
    """One of the owner's files; another owner's, a missing one or an id that is not a number: 404 alike."""
    try:
        pk = int(file_id)
    except (TypeError, ValueError):
        raise NotFoundError("not_found", "That file does not exist.") from None
    stored = StoredFile.objects.filter(owner=owner, pk=pk).first()
    if stored is None:
        raise NotFoundError("not_found", "That file does not exist.")
    return stored
