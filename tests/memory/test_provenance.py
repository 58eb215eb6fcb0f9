"""Every memory version knows where it came from; an answer's writes can be undone, a left branch's forgotten."""

from __future__ import annotations

import pytest

from chat.services import chat_message_edit, chat_message_send
from memory.models import MemoryItem, MemoryItemHistory
from memory.provenance import Provenance
from memory.services import memory_item_update
from tests.chat.helpers import chat_workflow

pytestmark = pytest.mark.django_db(transaction=True)


def _send(workflow, text):
    message, run, _ = chat_message_send(workflow=workflow, text=text)
    run.refresh_from_db()
    return message, run


def test_a_memory_written_by_the_tool_records_its_firing_run_and_agent(owner, inline):
    workflow, generation, ids = chat_workflow(owner, memory=True)
    _, run = _send(workflow, "remember: my cat is Tom")
    (row,) = MemoryItemHistory.objects.filter(operation="remember")
    assert row.source == "agent" and row.actor == f"agent:{ids['lead']}"
    assert row.firing_id == run.firing_id and row.chat_run_id == run.pk
    assert row.agent_node_id == ids["lead"] and row.generation == generation
    assert row.detail["prompt_excerpt"] == "remember: my cat is Tom" and row.detail["agent_name"] == "Lead"


def test_an_owner_edit_in_the_panel_api_records_the_owner(owner, owner_client, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _send(workflow, "remember: my cat is Tom")
    item = MemoryItem.objects.get()
    url = f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/items/{item.pk}/"
    response = owner_client.patch(url, {"expected_version": 1, "content": "my cat is Tim"}, format="json")
    assert response.status_code == 200, response.content
    edit = MemoryItemHistory.objects.get(operation="update")
    assert edit.source == "api" and edit.actor == f"owner:{owner.pk}" and edit.firing_id is None
    history = owner_client.get(f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/history/?item={item.pk}").json()
    assert [v["provenance"]["source"] for v in history["versions"]] == ["api", "agent"]


def test_undo_from_the_chat_restores_the_previous_version_as_a_new_version(owner, owner_client, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _send(workflow, "remember: the launch is on Friday")
    item = MemoryItem.objects.get()
    # A later answer changes the item (the offline agent has no update command: its tool write is made here, with
    # the provenance the runtime gives a tool call of that run); undoing that answer brings Friday back.
    _, run = _send(workflow, "when is the launch?")
    memory_item_update(
        namespace=item.namespace,
        item_id=item.pk,
        expected_version=1,
        patch={"content": "the launch is on Monday"},
        actor=f"agent:{ids['lead']}",
        provenance=Provenance("agent", chat_run_id=run.pk, agent_node_id=ids["lead"]),
    )
    writes = owner_client.get(f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/memory/").json()
    assert writes["count"] == 1 and writes["writes"][0]["operation"] == "update"

    undone = owner_client.post(f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/memory/undo/")
    assert undone.status_code == 200 and undone.json()["restored"] == [item.pk]
    item.refresh_from_db()
    assert item.content == "the launch is on Friday" and item.version == 3
    undo_row = MemoryItemHistory.objects.filter(item_id=item.pk).order_by("-id").first()
    assert undo_row.source == "owner" and undo_row.detail["undo_of_run"] == run.pk


def test_undo_of_an_answer_that_created_a_memory_forgets_it_with_a_trace(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner, memory=True)
    _, run = _send(workflow, "remember: my cat is Tom")
    item = MemoryItem.objects.get()
    undone = owner_client.post(f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/memory/undo/").json()
    assert undone["forgotten"] == [item.pk] and not MemoryItem.objects.exists()
    forget = MemoryItemHistory.objects.get(item_id=item.pk, operation="forget")
    assert forget.source == "owner" and forget.detail["undo_of_run"] == run.pk


def test_forgetting_what_a_left_branch_saved_forgets_exactly_those_items(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner, memory=True)
    _send(workflow, "remember: keep this one")
    kept = MemoryItem.objects.get()
    message, _ = _send(workflow, "remember: the old branch saved this")
    left = MemoryItem.objects.exclude(pk=kept.pk).get()
    chat_message_edit(workflow=workflow, message_id=message.pk, text="never mind")
    url = f"/api/workflows/{workflow.pk}/chat/messages/{message.pk}/branch-memory/"
    saved = owner_client.get(url).json()
    assert [w["item_id"] for w in saved["writes"]] == [left.pk]
    forgotten = owner_client.post(url).json()
    assert forgotten["forgotten"] == [left.pk]
    assert list(MemoryItem.objects.values_list("pk", flat=True)) == [kept.pk]


def test_restoring_an_earlier_version_is_a_new_version(owner, owner_client, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _send(workflow, "remember: version one")
    item = MemoryItem.objects.get()
    base = f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/items/{item.pk}/"
    owner_client.patch(base, {"expected_version": 1, "content": "version two"}, format="json")
    restored = owner_client.post(base + "restore/", {"version": 1, "expected_version": 2}, format="json")
    assert restored.status_code == 200, restored.content
    item.refresh_from_db()
    assert item.content == "version one" and item.version == 3
    stale = owner_client.post(base + "restore/", {"version": 1, "expected_version": 2}, format="json")
    assert stale.status_code == 409


def test_another_owner_sees_none_of_it(owner, other_client, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    message, run = _send(workflow, "remember: private")
    item = MemoryItem.objects.get()
    for url in (
        f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/history/",
        f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/memory/",
        f"/api/workflows/{workflow.pk}/chat/messages/{message.pk}/branch-memory/",
    ):
        assert other_client.get(url).status_code == 404, url
    for url in (
        f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/memory/undo/",
        f"/api/workflows/{workflow.pk}/chat/messages/{message.pk}/branch-memory/",
        f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/items/{item.pk}/restore/",
    ):
        assert other_client.post(url, {"version": 1, "expected_version": 1}, format="json").status_code == 404, url
    assert MemoryItem.objects.get().content == "private"


def test_the_request_view_lists_recalled_memories_tokens_and_cost_as_the_provider_got_them(
    owner, owner_client, inline, provider_requests
):
    from conversations.models import UsageRecord

    workflow, _, ids = chat_workflow(owner, memory=True)
    _send(workflow, "remember: my cat is Tom")
    _, run = _send(workflow, "recall: cat")
    view = owner_client.get(f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/request/").json()

    sent_first_step, sent_second_step = provider_requests[-2:]
    assert [s["request"]["messages"] for s in view["steps"]] == [len(sent_first_step), len(sent_second_step)]
    assert view["steps"][0]["request"]["stored_messages"] == 5  # the first turn: system, user, call, result, answer
    assert view["tools"][0]["name"] == "memory" and view["steps"][0]["request"]["tools"] == ["memory"]
    (recalled,) = view["recalled_memories"]
    assert recalled["content"] == "my cat is Tom" and recalled["score"] > 0
    ledger = UsageRecord.objects.filter(kind="llm", idempotency_key__in=[
        f"llm-step:{step_id}" for step_id in run_steps(run)])  # fmt: skip
    assert view["tokens"]["input_tokens"] == sum(r.input_tokens for r in ledger) > 0
    assert view["tokens"]["output_tokens"] == sum(r.output_tokens for r in ledger)
    assert view["changed_since_previous"]["messages"] == len(sent_first_step) - 2  # what the first turn added
    assert view["next_turn"]["input_tokens_estimate"] > 0


def run_steps(run) -> list[int]:
    from agents.models import LlmStep

    return list(LlmStep.objects.filter(firing_id=run.firing_id).values_list("pk", flat=True))
