"""Each process's own verified copy of the stored lists it read or wrote (the store's speed, never its truth).

Save cost must not grow with the conversation. Callers pass the whole list, so the store finds the common prefix
with what is stored and writes only past it; finding that prefix without re-serializing the whole list uses this
copy, tagged with the header's id and `version` and installed only on commit. A load hands out the copy's own
message objects, read-only (`providers/readonly.py`), so a caller that saves `[*loaded, *new]` is checked by
identity, one
pointer per message; a message built anew is compared by content. When the copy is missing or stale (another
process wrote since), the stored per-message hashes are compared instead: correct, but a hash of the list.
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings

from conversations.models import EMPTY_DIGEST

from .keys import ConversationKey


@dataclass
class ProcessCopy:
    conversation_id: int
    version: int
    messages: list[dict] = field(repr=False)  # parsed from the stored JSON; never handed to a caller
    size_bytes: int = 0
    digest: str = EMPTY_DIGEST


class ProcessCopies:
    def __init__(self) -> None:
        self._entries: OrderedDict[ConversationKey, ProcessCopy] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: ConversationKey) -> ProcessCopy | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: ConversationKey, entry: ProcessCopy) -> None:
        limit, max_bytes = settings.CONVERSATION_CACHE_ENTRIES, settings.CONVERSATION_CACHE_MAX_BYTES
        if limit <= 0 or entry.size_bytes > max_bytes:
            self.drop(key)
            return
        with self._lock:
            current = self._entries.get(key)
            # A late on-commit hook must not replace a newer copy installed by another thread.
            if (
                current is not None
                and current.conversation_id == entry.conversation_id
                and current.version > entry.version
            ):
                return
            self._entries[key] = entry
            self._entries.move_to_end(key)
            total = sum(e.size_bytes for e in self._entries.values())
            while len(self._entries) > limit or total > max_bytes:
                _, evicted = self._entries.popitem(last=False)
                total -= evicted.size_bytes

    def drop(self, key: ConversationKey) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


process_copies = ProcessCopies()


def forget_process_copies(key: ConversationKey | None = None) -> None:
    """Drop this process's copy of `key` (or of every key), as if another process had written last. Tests and the
    benchmark use it to exercise the cold path."""
    if key is None:
        process_copies.clear()
    else:
        process_copies.drop(key)


@contextmanager
def gc_paused():
    # Parsing a long conversation allocates tens of thousands of containers; letting the cyclic collector run
    # in the middle of it (and traverse the whole process) costs more than the parse itself.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
