"""Where adapters read an attached file's bytes (the `file` block in providers/wire.py).

providers/ sits below the app that stores files, so that app hands its reader over at start-up
(`AppConfig.ready()`), the way node types and listeners are registered. Adapters call `read_file_bytes` only
while building a request, never inside a lock.
"""

from __future__ import annotations

from collections.abc import Callable


class FileUnavailable(LookupError):
    """No stored bytes for a referenced file (swept, never stored, or no reader registered)."""


_reader: Callable[[str], bytes] | None = None


def register_file_reader(reader: Callable[[str], bytes]) -> None:
    global _reader
    _reader = reader


def read_file_bytes(sha256: str) -> bytes:
    if _reader is None:
        raise FileUnavailable(f"no file storage is registered to read {sha256[:12]}…")
    return _reader(sha256)
