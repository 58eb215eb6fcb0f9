"""Writes of the conversations app that are not the store itself: the owner's Clear, the usage ledger, settings."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.errors import ServiceError

from .models import OwnerConversationSettings, RuntimeInteractionPoint, RuntimeSessionBinding, UsageRecord
from .store import clear_conversation

_context_cleared_listeners: list = []


def register_context_cleared_listener(listener) -> None:
    """`listener(*, workflow, agent_node_ids)` runs after the owner cleared those agents' live conversations (the
    chat registers one in `ChatConfig.ready()` to drop its notes and mark the thread)."""
    if listener not in _context_cleared_listeners:
        _context_cleared_listeners.append(listener)


def conversation_context_clear(*, workflow, agent_node_id: str) -> int:
    """The owner's Clear of one agent's live conversation (Context panel, API): the rows go, then the listeners
    hear of it. Returns how many conversations were deleted (0 when the live generation stored none)."""
    if not workflow.live_generation:
        return 0
    deleted = clear_conversation(workflow, generation=workflow.live_generation, agent_node_id=agent_node_id)
    for listener in _context_cleared_listeners:
        listener(workflow=workflow, agent_node_ids=[agent_node_id])
    return deleted


_USAGE = UsageRecord._meta.db_table
_COLUMNS = (
    "idempotency_key",
    "owner_id",
    "workflow_id",
    "generation",
    "agent_node_id",
    "kind",
    "provider",
    "model",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost",
    "outcome",
    "meta",
    "created_at",
)


@dataclass(frozen=True, kw_only=True)
class UsageEntry:
    """One provider call as the ledger keeps it. `cost` None: no price is known (the reason is in `meta`)."""

    idempotency_key: str
    kind: str
    provider: str
    model: str
    outcome: str
    owner_id: int | None = None
    workflow_id: int | None = None
    generation: int | None = None
    agent_node_id: str = ""
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost: Decimal | float | None = None
    meta: dict | None = None

    def __post_init__(self) -> None:
        if self.kind not in UsageRecord.Kind.values:
            raise ValueError(f"unknown usage kind {self.kind!r}")
        if self.outcome not in UsageRecord.Outcome.values:
            raise ValueError(f"unknown usage outcome {self.outcome!r}")


def usage_record_statements(*, entry: UsageEntry) -> list[tuple[str, str, list]]:
    """`usage_record_append` as a named statement `(name, sql, params)`, for a caller that sends it as a WITH clause
    of a write it makes anyway (the runtime bills a turn with its firing's write at the end of the turn)."""
    values = [
        entry.idempotency_key,
        entry.owner_id,
        entry.workflow_id,
        entry.generation,
        entry.agent_node_id or "",
        entry.kind,
        entry.provider,
        entry.model,
        max(0, int(entry.input_tokens)),
        max(0, int(entry.cached_input_tokens)),
        max(0, int(entry.output_tokens)),
        max(0, int(entry.reasoning_tokens)),
        None if entry.cost is None else Decimal(str(entry.cost)),
        entry.outcome,
        json.dumps(entry.meta or {}),
        timezone.now(),
    ]
    placeholders = ", ".join("%s::jsonb" if column == "meta" else "%s" for column in _COLUMNS)
    return [
        (
            "usage_recorded",
            f"INSERT INTO {_USAGE} ({', '.join(_COLUMNS)}) VALUES ({placeholders}) "
            "ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
            values,
        )
    ]


def usage_record_append(*, entry: UsageEntry) -> bool:
    """Append one provider call to the ledger. Returns False when `idempotency_key` is already recorded: a retried
    persist never bills twice (insert-on-conflict-do-nothing, so concurrent retries cannot both insert)."""
    ((_, sql, params),) = usage_record_statements(entry=entry)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


def owner_conversation_settings_update(*, owner, tool_result_max_chars: int | None) -> OwnerConversationSettings:
    """Set the owner's own tool-result cap (None: the site's). It may only lower the site's cap."""
    from django.conf import settings

    if tool_result_max_chars is not None and not 100 <= tool_result_max_chars <= settings.TOOL_RESULT_MAX_CHARS:
        raise ServiceError(
            "invalid_request",
            f"tool_result_max_chars must be between 100 and the site's {settings.TOOL_RESULT_MAX_CHARS:,} (or null).",
        )
    row, _ = OwnerConversationSettings.objects.update_or_create(
        owner=owner, defaults={"tool_result_max_chars": tool_result_max_chars}
    )
    return row


def runtime_session_binding_record(
    *,
    key,
    runtime: str,
    session_id: str,
    transcript_path: str,
    cursor_length: int,
    cursor_digest: str,
    session_cost_usd: Decimal,
) -> RuntimeSessionBinding:
    """Keep the runtime session a conversation continues in, with the cursor of the stored list it saw last."""
    binding, _ = RuntimeSessionBinding.objects.update_or_create(
        workflow_id=key.workflow_id,
        generation=key.generation,
        agent_node_id=key.agent_node_id,
        defaults={
            "runtime": runtime,
            "session_id": session_id,
            "transcript_path": transcript_path,
            "cursor_length": cursor_length,
            "cursor_digest": cursor_digest,
            "session_cost_usd": session_cost_usd,
        },
    )
    return binding


def runtime_interaction_point_record(
    *,
    key,
    runtime: str,
    agent_ref: str,
    cursor_length: int,
    cursor_digest: str,
    interaction_id: str,
    environment_id: str,
) -> RuntimeInteractionPoint | None:
    """Keep which interaction (and environment) a conversation continues from at this stored cursor. None when a
    concurrent save recorded the same point first (the other one is just as right)."""
    try:
        with transaction.atomic():
            point, _ = RuntimeInteractionPoint.objects.update_or_create(
                workflow_id=key.workflow_id,
                generation=key.generation,
                agent_node_id=key.agent_node_id,
                cursor_length=cursor_length,
                cursor_digest=cursor_digest,
                defaults={
                    "runtime": runtime,
                    "agent_ref": agent_ref,
                    "interaction_id": interaction_id,
                    "environment_id": environment_id,
                },
            )
    except IntegrityError:
        return None
    return point
