"""How workflow lifecycle events reach the store (registered in ConversationsConfig.ready)."""

from __future__ import annotations

from .store import clear_conversation


def reset_conversations(*, workflow, previous_generation, new_generation, actor=None, **_) -> int:
    """Workflow Reset clears every stored conversation of the workflow (the new generation starts fresh)."""
    return clear_conversation(workflow)


def archive_conversations(*, workflow_id, workflow=None, reason="", context_node_ids=(), agent_node_ids=(), **_) -> int:
    """A removed Context (or a cleared one) clears the conversations of the agents it served, in every generation;
    a deleted workflow clears all of them (the rows cascade anyway; this keeps the job idempotent and explicit)."""
    if reason == "workflow_deleted" or not agent_node_ids:
        return clear_conversation(workflow_id) if reason == "workflow_deleted" else 0
    return sum(clear_conversation(workflow_id, agent_node_id=agent) for agent in sorted(set(agent_node_ids)))
