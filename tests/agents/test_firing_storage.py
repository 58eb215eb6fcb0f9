"""What a firing keeps and writes: never a copy of the conversation, whatever its length."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import Firing, LlmStep, ToolCallResult
from agents.services.firings import firing_start
from agents.services.retention import firings_prune
from conversations.models import AgentConversation, UsageRecord
from conversations.services import owner_conversation_settings_update
from conversations.store import (
    CLEARED_PLACEHOLDER,
    conversation_key,
    forget_process_copies,
    load_conversation,
    save_conversation,
)
from providers.wire import validate_messages
from tests.agents.factories import assistant_with

pytestmark = pytest.mark.django_db(transaction=True)


def _history(count: int) -> list[dict]:
    """A stored conversation of `count` messages (~90 bytes each: 1,000 of them stay under the offline model's
    compaction threshold), as earlier turns left it."""
    messages = [{"role": "system", "blocks": [{"type": "text", "text": "You are Lead."}]}]
    while len(messages) < count:
        turn = len(messages)
        messages.append({"role": "user", "blocks": [{"type": "text", "text": f"question {turn} " + "q" * 20}]})
        messages.append({"role": "assistant", "blocks": [{"type": "text", "text": f"answer {turn} " + "a" * 20}]})
    return messages[:count]


def _written_bytes(queries) -> int:
    """Bytes of SQL (parameters included: psycopg binds them client-side) of every statement that writes."""
    writes = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "WITH", "DELETE"))]
    return sum(len(sql.encode()) for sql in writes)


def _turn_writes(owner, stored_messages: int) -> tuple[int, Firing]:
    workflow, generation, ids = assistant_with(owner, memory=True)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    save_conversation(key, _history(stored_messages))
    forget_process_copies()  # the worker that runs the turn never loaded this conversation
    with CaptureQueriesContext(connection) as captured:
        firing_id = firing_start(
            workflow=workflow,
            generation=generation,
            agent_node_id=ids["lead"],
            prompt="remember: the launch is on Friday",
        )
    assert len(load_conversation(key)) == stored_messages + 4  # user, call, result, answer
    return _written_bytes(captured.captured_queries), Firing.objects.get(pk=firing_id)


def test_a_turn_writes_the_same_at_1000_messages_as_at_10(owner, inline):
    small, _ = _turn_writes(owner, 11)
    large, firing = _turn_writes(owner, 1001)
    # The stored conversation is ~90 KB at 1,000 messages: one copy of it anywhere in the writes would show.
    assert large < 30_000, large
    assert large < small * 1.2 + 2_000, (small, large)
    assert firing.state == Firing.State.FINISHED


def test_a_finished_firing_keeps_no_message_list(owner, inline):
    _, firing = _turn_writes(owner, 1001)
    assert firing.pending_messages == []
    assert firing.stored_prefix["length"] == 1005
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(f.*) FROM agents_firing f WHERE id = %s", [firing.pk])
        (row_bytes,) = cursor.fetchone()
    assert row_bytes < 8_000, row_bytes  # the size of its config and tools, not of the conversation's 90 KB


def test_pruning_removes_old_ended_firings_and_keeps_the_ledger(owner, inline, settings):
    settings.AGENT_FIRING_RETENTION_DAYS = 7
    workflow, generation, ids = assistant_with(owner, memory=True)
    old = firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="remember: old")
    recent = firing_start(
        workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="remember: recent"
    )
    Firing.objects.filter(pk=old).update(finished_at=timezone.now() - timedelta(days=8))
    billed = UsageRecord.objects.count()
    assert billed == 4 and LlmStep.objects.filter(firing_id=old).count() == 2

    assert firings_prune() == 1
    assert not Firing.objects.filter(pk=old).exists()
    assert not LlmStep.objects.filter(firing_id=old).exists()
    assert not ToolCallResult.objects.filter(firing_id=old).exists()
    assert Firing.objects.filter(pk=recent).exists()
    assert UsageRecord.objects.count() == billed  # billing outlives run history


def test_old_tool_results_become_placeholders_past_the_budget_in_a_firing(owner, inline, settings):
    settings.CONVERSATION_TOOL_RESULT_BUDGET_BYTES = 6_000
    workflow, generation, ids = assistant_with(owner, memory=True)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    for turn in range(8):
        firing_start(
            workflow=workflow,
            generation=generation,
            agent_node_id=ids["lead"],
            prompt=f"remember: fact {turn} " + "x" * 400,
        )
    stored = load_conversation(key)
    validate_messages(stored)  # every call still has its answer
    results = [b for m in stored for b in m["blocks"] if b["type"] == "tool_result"]
    assert len(results) == 8
    cleared = [r for r in results if r["content"] == CLEARED_PLACEHOLDER]
    # The owner's long messages alone keep the transcript over half the budget, so every earlier result goes.
    assert cleared == results[:7]
    assert results[-1]["content"] != CLEARED_PLACEHOLDER  # the latest turn is never cleared
    assert all(r["tool_call_id"] and r["name"] == "memory" for r in results)


def test_a_conversation_over_budget_with_nothing_to_clear_is_not_rewritten(owner, inline, settings):
    settings.CONVERSATION_TOOL_RESULT_BUDGET_BYTES = 2_000
    workflow, generation, ids = assistant_with(owner, memory=True)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    save_conversation(key, _history(41))  # ~4 KB of plain text: over the budget, no tool result in it
    before = AgentConversation.objects.get(workflow=workflow).version
    firing_start(
        workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="remember: the launch is on Friday"
    )
    # Three appends (the message and the call, the result, the answer): no rewrite, the text stays as it was.
    assert AgentConversation.objects.get(workflow=workflow).version == before + 3
    assert load_conversation(key)[:41] == _history(41) or [m["blocks"] for m in load_conversation(key)[:41]] == [
        m["blocks"] for m in _history(41)
    ]


def test_an_owner_can_lower_the_tool_result_cap_for_their_agents(owner, inline):
    owner_conversation_settings_update(owner=owner, tool_result_max_chars=150)
    workflow, generation, ids = assistant_with(owner, memory=True)
    firing_start(
        workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="remember: " + "long fact " * 60
    )
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    (result,) = [b for m in stored for b in m["blocks"] if b["type"] == "tool_result"]
    assert result["content"][:150] == result["content"][:150] and "Result truncated" in result["content"]
    assert len(result["content"].split("\n\n[Result truncated")[0]) == 150


def test_the_owner_cap_api_refuses_raising_it_above_the_site(owner_client, settings):
    response = owner_client.put(
        "/api/settings/conversations/", {"tool_result_max_chars": settings.TOOL_RESULT_MAX_CHARS + 1}, format="json"
    )
    assert response.status_code == 400
    lowered = owner_client.put("/api/settings/conversations/", {"tool_result_max_chars": 500}, format="json")
    assert lowered.status_code == 200 and lowered.json()["effective_tool_result_max_chars"] == 500
    assert owner_client.get("/api/settings/conversations/").json()["tool_result_max_chars"] == 500
