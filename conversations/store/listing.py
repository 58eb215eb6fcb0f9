"""Header-level reads and writes that are not the messages: a workflow's stored conversations for the panel and
the display-only context pressure (docs/architecture.md#usage-and-pressure)."""

from __future__ import annotations

from django.utils import timezone

from conversations.models import AgentConversation

from .keys import ConversationKey


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
    updated = AgentConversation.objects.filter(
        workflow_id=key.workflow_id, generation=key.generation, agent_node_id=key.agent_node_id
    ).update(
        pressure_input_tokens=max(0, int(input_tokens)),
        pressure_output_tokens=max(0, int(output_headroom_tokens)),
        context_window_tokens=context_window_tokens,
        pressure_measured_at=timezone.now(),
    )
    return updated == 1
