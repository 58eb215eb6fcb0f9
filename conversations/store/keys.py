from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class ConversationKey:
    """Where a firing's conversation is saved: one per agent per workflow generation.

    Ordering is the lock order: whoever locks several conversations locks them in ascending key order.
    """

    workflow_id: int
    generation: int
    agent_node_id: str

    def as_log(self) -> dict:
        return {"workflow_id": self.workflow_id, "generation": self.generation, "agent_node_id": self.agent_node_id}


def conversation_key(workflow_id: int, generation: int, agent_node_id: str) -> ConversationKey:
    if not isinstance(agent_node_id, str) or not agent_node_id:
        raise ValueError("agent_node_id must be a non-empty string")
    return ConversationKey(int(workflow_id), int(generation), agent_node_id)
