"""Header-level reads and writes that are not the messages: a workflow's stored conversations for the panel and
the display-only context pressure (docs/architecture.md#usage-and-pressure)."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from conversations.models import AgentConversation

from .keys import ConversationKey
from .results import HEADER


def list_conversations(workflow) -> list[dict]:
    """Panel metadata of every stored conversation of `workflow`, newest generation first."""
    workflow_id = int(getattr(workflow, "pk", workflow))
    return list(
        AgentConversation.objects.filter(workflow_id=workflow_id)
        .order_by("-generation", "agent_node_id")
        .values(
            "generation",
            "agent_node_id",
            "message_count",
            "size_bytes",
            "updated_at",
            "pressure_input_tokens",
            "pressure_output_tokens",
            "context_window_tokens",
        )
    )


def conversation_pressure_record(
    key: ConversationKey, *, input_tokens: int, output_headroom_tokens: int, context_window_tokens: int | None
) -> bool:
    """Store the agent's active context pressure (for display; never a usage figure). False when no row exists."""
    ((_, sql, params),) = conversation_pressure_statements(
        key,
        input_tokens=input_tokens,
        output_headroom_tokens=output_headroom_tokens,
        context_window_tokens=context_window_tokens,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def conversation_pressure_statements(
    key: ConversationKey, *, input_tokens: int, output_headroom_tokens: int, context_window_tokens: int | None
) -> list[tuple[str, str, list]]:
    """`conversation_pressure_record` as a named statement `(name, sql, params)`, for a caller that sends it as a
    WITH clause of a write it makes anyway (the runtime, with its firing's write at the end of a turn)."""
    return [
        (
            "pressure_recorded",
            f"UPDATE {HEADER} SET pressure_input_tokens = %s, pressure_output_tokens = %s, "
            "context_window_tokens = %s, pressure_measured_at = %s "
            "WHERE workflow_id = %s AND generation = %s AND agent_node_id = %s",
            [
                max(0, int(input_tokens)),
                max(0, int(output_headroom_tokens)),
                context_window_tokens,
                timezone.now(),
                key.workflow_id,
                key.generation,
                key.agent_node_id,
            ],
        )
    ]
