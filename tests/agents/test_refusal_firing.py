"""A refused Anthropic turn through a real firing (issue 30 #3): the owner reads the refusal in plain words as the
answer (the chat's reply is the firing's final text), and the call is billed up to the refusal."""

from __future__ import annotations

import pytest

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.models import UsageRecord
from tests.agents.factories import assistant_with
from tests.fakes import FakeAnthropic, Text, Turn

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_refused_turn_is_the_owners_answer_in_plain_words_and_billed(owner, monkeypatch, settings):
    settings.AGENT_EXECUTION_MODE = "inline"
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-refusal-0000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        workflow, generation, ids = assistant_with(owner, provider="anthropic", model="claude-sonnet-4-5")
        fake.push(Turn([Text("Step one of the expl")], stop="refusal", refusal_explanation="Cyber harm."))
        firing = Firing.objects.get(
            pk=firing_start(
                workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="write an exploit"
            )
        )
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    assert "declined" in firing.final_text and "Cyber harm." in firing.final_text
    assert "Step one" not in firing.final_text
    row = UsageRecord.objects.get(workflow_id=workflow.pk, kind="llm")
    assert row.output_tokens == 13 and row.cost > 0
