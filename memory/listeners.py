"""A hook for the owner's edits in the panel/API, so the chat app can leave a note for the agent.

Memory does not import chat: chat registers a listener (e.g. from its AppConfig.ready()) with
`register_memory_edit_listener(fn)`; `fn(edit: MemoryEdit)` runs after the commit, and its failure is logged,
never raised. The note key for an item is `edit.note_key` (`memory:<item id>`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryEdit:
    workflow_id: int
    memory_node_id: str
    item_id: int | None  # None for a clear
    operation: str  # remember | update | forget | clear
    version: int | None
    actor: str

    @property
    def note_key(self) -> str:
        return f"memory:{self.item_id}" if self.item_id is not None else "memory:clear"


_listeners: list[Callable[[MemoryEdit], None]] = []


def register_memory_edit_listener(fn: Callable[[MemoryEdit], None]) -> Callable[[MemoryEdit], None]:
    if fn not in _listeners:
        _listeners.append(fn)
    return fn


def unregister_memory_edit_listener(fn: Callable[[MemoryEdit], None]) -> None:
    if fn in _listeners:
        _listeners.remove(fn)


def _notify(edit: MemoryEdit) -> None:
    for fn in list(_listeners):
        try:
            fn(edit)
        except Exception:
            logger.exception("memory edit listener failed", extra={"workflow_id": edit.workflow_id})


def announce_memory_edit_on_commit(edit: MemoryEdit) -> None:
    transaction.on_commit(lambda: _notify(edit))
