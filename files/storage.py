"""Where a file's bytes live: Django's storage API under the alias FILE_STORAGE (docs/deploy.md#file-storage), one
object per SHA-256. Local disk under the data folder by default; an S3-compatible bucket through django-storages
when the operator sets it. Nothing else in the project names a path or a bucket."""

from __future__ import annotations

import hashlib
import re

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from providers.files import FileUnavailable

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def file_storage():
    return storages[settings.FILE_STORAGE]


def object_name(sha256: str) -> str:
    if not _HEX64.match(sha256 or ""):
        raise FileUnavailable("not a SHA-256")
    return f"{sha256[:2]}/{sha256[2:4]}/{sha256}"


def bytes_put(sha256: str, data: bytes) -> bool:
    """Store `data` under its hash unless it is there already; True when this call wrote it."""
    storage = file_storage()
    name = object_name(sha256)
    if storage.exists(name):
        return False
    saved = storage.save(name, ContentFile(data))
    if saved != name:  # a backend that renames on a race: the same bytes are under `name`, keep one copy
        storage.delete(saved)
    return True


def bytes_delete(sha256: str) -> None:
    storage = file_storage()
    name = object_name(sha256)
    if storage.exists(name):
        storage.delete(name)


def file_bytes_read(sha256: str) -> bytes:
    """The reader handed to providers (providers/files.py): the exact bytes, checked against their hash."""
    storage = file_storage()
    name = object_name(sha256)
    try:
        with storage.open(name, "rb") as handle:
            data = handle.read()
    except Exception as exc:  # each backend says "missing" its own way (OSError on disk, ClientError on S3)
        raise FileUnavailable(f"file {sha256[:12]}… is not in file storage") from exc
    if hashlib.sha256(data).hexdigest() != sha256:
        raise FileUnavailable(f"file {sha256[:12]}… in file storage does not match its hash")
    return data


def stored_hashes():
    """Every hash with bytes in file storage, with the time its object was written: (sha256, modified)."""
    storage = file_storage()
    top, _ = storage.listdir("")
    for first in top:
        second_level, _ = storage.listdir(first)
        for second in second_level:
            _, names = storage.listdir(f"{first}/{second}")
            for name in names:
                if _HEX64.match(name):
                    yield name, storage.get_modified_time(f"{first}/{second}/{name}")
