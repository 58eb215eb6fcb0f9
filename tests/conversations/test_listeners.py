"""Workflow lifecycle reaches the store through the workflows registries (registered in ConversationsConfig)."""

import pytest

from conversations.listeners import archive_conversations, reset_conversations
from conversations.store import conversation_key, list_conversations, save_conversation
from tests.conversations.factories import user
from workflows.listeners import archive_listeners, reset_listeners

pytestmark = pytest.mark.django_db


def test_the_listeners_are_registered():
    assert reset_listeners()["conversations"] is reset_conversations
    assert archive_listeners()["conversations"] is archive_conversations


def _fill(workflow):
    for generation in (1, 2):
        for agent in ("a", "b"):
            save_conversation(conversation_key(workflow.pk, generation, agent), [user("hi")])


def test_reset_clears_every_conversation_of_the_workflow(workflow):
    _fill(workflow)
    assert reset_conversations(workflow=workflow, previous_generation=2, new_generation=3) == 4
    assert list_conversations(workflow) == []


def test_a_removed_context_clears_the_agents_it_served_and_is_idempotent(workflow):
    _fill(workflow)
    assert archive_conversations(workflow_id=workflow.pk, workflow=workflow, reason="context_removed",
                                 context_node_ids=["c"], agent_node_ids=["a"]) == 2  # fmt: skip
    assert {r["agent_node_id"] for r in list_conversations(workflow)} == {"b"}
    assert archive_conversations(workflow_id=workflow.pk, workflow=workflow, reason="context_removed",
                                 context_node_ids=["c"], agent_node_ids=["a"]) == 0  # fmt: skip


def test_a_deleted_workflow_clears_all(workflow):
    _fill(workflow)
    assert archive_conversations(workflow_id=workflow.pk, workflow=None, reason="workflow_deleted") == 4
