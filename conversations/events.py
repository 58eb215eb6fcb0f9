"""What a committed change of a stored conversation announces: listeners and the `context.updated` event.

Both run after the durable commit, carry metadata only (never message content) and can never fail the write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.db import transaction

from core.realtime import publish_workflow_event

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConversationChange:
    workflow_id: int
    generation: int
    agent_node_id: str
    message_count: int
    version: int
    reason: str  # save | replace | compaction | clear


_listeners: list[Callable[[ConversationChange], None]] = []


def register_conversation_listener(listener: Callable[[ConversationChange], None]) -> Callable:
    """Call `listener(change)` after every committed change. Returns it, so it can be used as a decorator."""
    if listener not in _listeners:
        _listeners.append(listener)
    return listener


def unregister_conversation_listener(listener: Callable[[ConversationChange], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def _run_listeners(change: ConversationChange) -> None:
    for listener in list(_listeners):
        try:
            listener(change)
        except Exception:
            logger.exception("conversation listener failed", extra=asdict(change))


def context_updated_event(*, workflow_id: int, generation: int, agent_node_id: str, message_count: int) -> dict:
    """A stored conversation changed: open Context panels refetch (metadata only, never messages)."""
    return {
        "type": "context.updated",
        "workflow_id": workflow_id,
        "generation": generation,
        "agent_node_id": agent_node_id,
        "message_count": message_count,
    }


def announce_change_on_commit(change: ConversationChange) -> None:
    transaction.on_commit(lambda: _run_listeners(change))
    publish_workflow_event(
        workflow_id=change.workflow_id,
        event=context_updated_event(
            workflow_id=change.workflow_id,
            generation=change.generation,
            agent_node_id=change.agent_node_id,
            message_count=change.message_count,
        ),
    )
