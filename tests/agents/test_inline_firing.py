"""Firings run in-process (AGENT_EXECUTION_MODE=inline): the same step functions the worker runs."""

import pytest

from agents.models import Firing, LlmStep, ToolCallResult
from agents.services.firings import firing_start
from conversations.models import UsageRecord
from conversations.store import conversation_key, load_conversation
from tests.agents.factories import assistant_with

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def inline(settings):
    settings.AGENT_EXECUTION_MODE = "inline"


def _blocks(messages, kind):
    return [b for m in messages for b in m["blocks"] if b["type"] == kind]


def test_an_echo_firing_saves_the_exact_sent_list_and_the_answer(owner):
    workflow, generation, ids = assistant_with(owner)
    firing_id = firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello there")
    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    assert stored[0]["blocks"][0]["text"] == "You are Lead."
    assert stored[1]["blocks"][0]["text"] == "hello there"
    assert "I see 1 earlier message" in firing.final_text or "earlier" in firing.final_text
    assert UsageRecord.objects.filter(workflow_id=workflow.pk, outcome="ok").count() == 1


def test_a_second_firing_continues_the_conversation(owner):
    workflow, generation, ids = assistant_with(owner)
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="first")
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="second")
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "user", "assistant"]
    assert [b["text"] for b in _blocks(stored, "text") if b["text"] in ("first", "second")] == ["first", "second"]


def test_without_a_context_each_firing_starts_fresh_and_stores_nothing(owner, provider_requests):
    workflow, generation, ids = assistant_with(owner, context=False)
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="first")
    second = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="second")
    )
    assert second.state == Firing.State.FINISHED
    assert [m["role"] for m in provider_requests[-1]] == ["system", "user"]
    assert second.pending_messages == [] and second.stored_prefix is None  # an ended firing keeps no list
    assert load_conversation(conversation_key(workflow.pk, generation, ids["lead"])) == []


def test_a_todo_command_runs_the_tool_loop(owner):
    workflow, generation, ids = assistant_with(owner, todos=True)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="todo: buy milk")
    )
    assert firing.state == Firing.State.FINISHED, firing.error_message
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    call = _blocks(stored, "tool_call")[0]
    result = _blocks(stored, "tool_result")[0]
    assert call["name"] == "todos" and result["tool_call_id"] == call["id"] and not result["is_error"]
    assert "buy milk" in result["content"]
    assert LlmStep.objects.filter(firing=firing, state=LlmStep.State.PERSISTED).count() == 2
    assert ToolCallResult.objects.filter(firing=firing).count() == 1


def test_a_command_for_a_tool_the_agent_lacks_is_answered_in_words(owner):
    workflow, generation, ids = assistant_with(owner)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="todo: buy milk")
    )
    assert firing.state == Firing.State.FINISHED
    assert "no todo" in firing.final_text.lower() or "no todos" in firing.final_text.lower()


def test_step_logs_carry_ids_and_counts_but_no_content(owner, caplog):
    import logging

    from core.logfmt import KeyValueFormatter

    workflow, generation, ids = assistant_with(owner)
    with caplog.at_level(logging.INFO, logger="agents"):
        firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="secret-prompt-text")
    lines = [KeyValueFormatter("%(message)s").format(record) for record in caplog.records]
    done = next(line for line in lines if line.startswith("llm step done"))
    assert "firing_id=" in done and "duration_ms=" in done and "output_tokens=" in done
    assert not any("secret-prompt-text" in line for line in lines)


def test_a_provider_failure_fails_the_firing_with_a_code_and_bills_an_error(owner, monkeypatch):
    from tests.processes import free_port

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    workflow, generation, ids = assistant_with(owner, provider="openai", model="gpt-4.1-mini")
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )
    assert firing.state == Firing.State.FAILED
    assert firing.error_code == "provider_network", firing.error_code
    assert "sk-test-not-a-real-key" not in firing.error_message
    assert LlmStep.objects.get(firing=firing).state == LlmStep.State.FAILED
    assert UsageRecord.objects.filter(workflow_id=workflow.pk, outcome="error").count() == 1
    # The conversation is left as it was: nothing is written before a request succeeds.
    assert load_conversation(conversation_key(workflow.pk, generation, ids["lead"])) == []


def test_firing_start_takes_keywords_only(owner):
    workflow, generation, ids = assistant_with(owner)
    with pytest.raises(TypeError):
        firing_start(workflow, generation, ids["lead"], "hello")  # the positional call is the point
    assert not Firing.objects.exists()


def test_a_request_that_cannot_be_built_fails_the_firing_with_the_store_code_and_bills_nothing(owner, monkeypatch):
    from agents.services import execute
    from conversations.store import ConversationLoadFailed

    def unreadable(firing):
        raise ConversationLoadFailed(message="the stored row could not be read")

    monkeypatch.setattr(execute, "firing_messages", unreadable)
    workflow, generation, ids = assistant_with(owner)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )
    assert (firing.state, firing.error_code) == (Firing.State.FAILED, "conversation_load_failed")
    assert firing.error_message == "the stored row could not be read"
    step = LlmStep.objects.get(firing=firing)
    assert (step.state, step.error_code, step.duration_ms) == (LlmStep.State.FAILED, "conversation_load_failed", 0)
    assert not UsageRecord.objects.filter(workflow_id=workflow.pk).exists()  # no call was made


def test_a_continuing_firing_appends_after_the_stored_prefix_it_knows(owner):
    from conversations.models import AgentConversation

    workflow, generation, ids = assistant_with(owner)
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="first")
    second = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="second")
    )
    header = AgentConversation.objects.get(workflow=workflow, generation=generation, agent_node_id=ids["lead"])
    # The firing knew the stored list it extends and kept track of the save it made.
    assert second.stored_prefix == {
        "length": 5,
        "version": header.version,
        "digest": header.digest,
        "size_bytes": header.size_bytes,
    }


def test_a_firing_after_a_crash_continues_from_the_repaired_list(owner):
    from conversations.store import NOT_COMPLETED, save_conversation
    from providers.wire import validate_messages

    workflow, generation, ids = assistant_with(owner, todos=True)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    call = {"type": "tool_call", "id": "c1", "name": "todos", "arguments_raw": "{}", "arguments": {}}
    save_conversation(
        key,
        [
            {"role": "system", "blocks": [{"type": "text", "text": "You are Lead."}]},
            {"role": "user", "blocks": [{"type": "text", "text": "before the crash"}]},
            {"role": "assistant", "blocks": [call]},  # the worker died before the result was saved
        ],
    )
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="after the crash")
    )
    assert firing.state == Firing.State.FINISHED and firing.stored_prefix["length"] == 6
    stored = load_conversation(key)
    validate_messages(stored)
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert NOT_COMPLETED.split(":")[0] in stored[3]["blocks"][0]["content"]


def test_a_firing_is_not_held_up_by_an_update_of_its_workflow_row(owner):
    # Steps lock their firing row only (lock order: a workflow row is never taken after a firing row). A write to
    # the workflow's row (an UPDATE takes FOR NO KEY UPDATE, which foreign-key inserts do not wait for) must not
    # stall its firings, nor may one firing's step hold up another's by locking the shared workflow row.
    import threading

    from django.db import connection, transaction

    from workflows.models import Workflow

    workflow, generation, ids = assistant_with(owner)
    locked, finished, seen = threading.Event(), threading.Event(), []

    def hold_the_workflow_row():
        try:
            with transaction.atomic():
                Workflow.objects.select_for_update(no_key=True).get(pk=workflow.pk)
                locked.set()
                seen.append(finished.wait(timeout=20))
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_workflow_row)
    holder.start()
    assert locked.wait(timeout=10)
    firing = Firing.objects.get(
        pk=firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="while the workflow is locked"
        )
    )
    finished.set()
    holder.join()
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    assert seen == [True]  # it finished while the row was still held
