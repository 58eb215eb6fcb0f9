"""A Workflow Reset ends live firings with `reset`; a call that was in flight is billed and saves nothing."""

import pytest

from agents.models import Firing, LlmStep
from agents.services.execute import execute_llm_step
from agents.services.firings import firing_start
from agents.services.persist import persist_turn
from agents.services.prepare import prepare_payload
from conversations.models import UsageRecord
from conversations.store import conversation_key, load_conversation
from tests.agents.factories import assistant_with
from workflows.services import workflow_reset

pytestmark = pytest.mark.django_db(transaction=True)


def test_reset_ends_a_live_firing_and_its_late_answer_lands_nowhere(owner, settings):
    settings.AGENT_EXECUTION_MODE = "celery"  # no worker in this test: we drive the steps by hand
    workflow, generation, ids = assistant_with(owner)
    firing_id = firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    prepare_payload(str(firing_id))
    # The provider call is in flight when the owner resets: the step is recorded as started and then answers.
    step = LlmStep.objects.create(firing_id=firing_id, iteration=1)
    workflow_reset(workflow=workflow, actor=owner)
    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FAILED and firing.error_code == "reset" and firing.stop_requested
    LlmStep.objects.filter(pk=step.pk).update(
        state=LlmStep.State.COMPLETED,
        result={
            "message": {"role": "assistant", "blocks": [{"type": "text", "text": "late"}]},
            "usage": {"input_tokens": 5, "output_tokens": 2},
            "stop_reason": "end_turn",
        },
    )
    persist_turn(str(firing_id), 1)
    assert load_conversation(conversation_key(workflow.pk, generation, ids["lead"])) == []
    assert UsageRecord.objects.filter(idempotency_key=f"llm-step:{step.pk}", outcome="ok").count() == 1
    assert LlmStep.objects.get(pk=step.pk).state == LlmStep.State.PERSISTED


def test_reset_writes_each_live_firing_once_stopped_and_ended(owner, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.AGENT_EXECUTION_MODE = "celery"  # no worker: the firings stay live until the reset
    workflow, generation, ids = assistant_with(owner)
    firing_ids = [
        firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=text)
        for text in ("one", "two")
    ]
    prepare_payload(str(firing_ids[0]))  # one holds the conversation's lease, released with the same write
    with CaptureQueriesContext(connection) as queries:
        workflow_reset(workflow=workflow, actor=owner)
    table = f'"{Firing._meta.db_table}"'
    writes = [q["sql"] for q in queries if f"UPDATE {table}" in q["sql"]]
    assert len(writes) == 2, writes
    for firing in Firing.objects.filter(pk__in=firing_ids):
        assert (firing.state, firing.error_code, firing.stop_requested) == (Firing.State.FAILED, "reset", True)


def test_a_context_cleared_during_a_turn_is_not_written_back(owner, settings):
    from conversations.store import clear_conversation

    settings.AGENT_EXECUTION_MODE = "celery"  # no worker: the steps are driven by hand around the Clear
    workflow, generation, ids = assistant_with(owner, todos=True)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    settings.AGENT_EXECUTION_MODE = "inline"
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="an earlier turn")
    settings.AGENT_EXECUTION_MODE = "celery"
    firing_id = str(
        firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="todo: buy milk")
    )
    prepare_payload(firing_id)
    execute_llm_step(firing_id, 1)
    persist_turn(firing_id, 1)  # saves the call and its result: 6 messages
    assert len(load_conversation(key)) == 6
    clear_conversation(workflow, generation=generation, agent_node_id=ids["lead"])  # the owner clears mid-turn
    execute_llm_step(firing_id, 2)
    persist_turn(firing_id, 2)
    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FINISHED  # the answer still reaches the owner
    assert load_conversation(key) == []  # but the cleared conversation stays cleared
