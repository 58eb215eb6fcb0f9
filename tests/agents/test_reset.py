"""A Workflow Reset ends live firings with `reset`; a call that was in flight is billed and saves nothing."""

import pytest

from agents.models import Firing, LlmStep
from agents.services import steps
from agents.services.firings import fire_agent
from conversations.models import UsageRecord
from conversations.store import conversation_key, load_conversation
from tests.agents.factories import assistant_with
from workflows.services import workflow_reset

pytestmark = pytest.mark.django_db(transaction=True)


def test_reset_ends_a_live_firing_and_its_late_answer_lands_nowhere(owner, settings):
    settings.AGENT_EXECUTION_MODE = "celery"  # no worker in this test: we drive the steps by hand
    workflow, generation, ids = assistant_with(owner)
    firing_id = fire_agent(workflow, generation, ids["lead"], "hello")
    steps.prepare_payload(str(firing_id))
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
    steps.persist_turn(str(firing_id), 1)
    assert load_conversation(conversation_key(workflow.pk, generation, ids["lead"])) == []
    assert UsageRecord.objects.filter(idempotency_key=f"llm-step:{step.pk}", outcome="ok").count() == 1
    assert LlmStep.objects.get(pk=step.pk).state == LlmStep.State.PERSISTED
