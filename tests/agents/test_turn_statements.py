"""What one turn sends to the database from the worker: the statement count is pinned, so it cannot grow back.

A turn at zero provider delay is mostly round trips and the code around them (bench/turn_profile.py,
bench/turn_overhead.py). These run the worker's path for a turn — `agent.prepare_payload` delivered as a task,
execute and persist continued in the same process — with the broker replaced by a list, and count what reaches
PostgreSQL (BEGIN, COMMIT and savepoints included: each is a round trip).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import SpendingLimit
from agents import dispatch
from agents.models import Firing, LlmStep
from agents.services.firings import firing_start
from conversations.models import UsageRecord
from conversations.store import conversation_key, load_conversation
from tests.agents.factories import assistant_with

pytestmark = pytest.mark.django_db(transaction=True)

# prepare: BEGIN, lock the firing (with its workflow), take the lease, read the stored list past this process's copy,
# write the firing, COMMIT; the claim: BEGIN, INSERT ... SELECT ... FOR NO KEY UPDATE (which also reads whether any
# spending limit may apply), COMMIT; the answer's UPDATE; persist: BEGIN, lock the firing and its step in one
# statement, the one-statement append in its savepoint (SAVEPOINT and RELEASE sent with it), the firing's end with
# the bill, the step's state, the pressure and the lease's release as WITH clauses, COMMIT.
TURN_STATEMENTS = 15


def worker_turn(broker, workflow, generation, agent, text) -> tuple[str, list[str]]:
    """Fire a turn and run its delivered task as a worker does; the firing id and the worker's statements."""
    broker.clear()
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=text))
    assert broker == [("agent.prepare_payload", (firing_id,))]
    broker.clear()
    with CaptureQueriesContext(connection) as captured, dispatch.running_steps():
        dispatch.step_function("agent.prepare_payload")(firing_id)
    assert broker == []  # the whole turn ran in this process: one broker hop per turn
    return firing_id, [query["sql"] for query in captured.captured_queries]


def test_a_turn_costs_the_worker_a_fixed_number_of_statements(owner, broker):
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    counts = []
    for turn in range(4):
        firing_id, statements = worker_turn(broker, workflow, generation, ids["lead"], f"turn {turn}")
        firing = Firing.objects.get(pk=firing_id)
        assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
        counts.append(len(statements))
    assert counts[1:] == [TURN_STATEMENTS] * 3, "\n".join(statements)
    # Nothing of the turn is lost by sending writes together: billed once, the step persisted, the lease free.
    steps = LlmStep.objects.filter(firing__workflow=workflow)
    assert list(steps.values_list("state", flat=True)) == [LlmStep.State.PERSISTED] * 4
    assert UsageRecord.objects.filter(idempotency_key__in=[f"llm-step:{s.pk}" for s in steps]).count() == 4
    assert [m["role"] for m in load_conversation(key)] == ["system"] + ["user", "assistant"] * 4
    joined = "\n".join(statements)
    assert "accounts_spendinglimit" not in joined.split("INSERT INTO agents_llmstep")[0]  # no budget query of its own
    leases = [sql for sql in statements if "conversations_firinglease" in sql]
    assert len(leases) == 2 and leases[1].startswith("WITH")  # taken in prepare, released with the firing's end


def test_the_claim_still_stops_a_turn_over_a_spending_limit(owner, broker):
    """The spending-limit check rides the claim; with a limit in place the check itself runs and refuses."""
    workflow, generation, ids = assistant_with(owner)
    firing_id, _ = worker_turn(broker, workflow, generation, ids["lead"], "first")
    assert Firing.objects.get(pk=firing_id).state == Firing.State.FINISHED
    SpendingLimit.objects.create(user=owner, daily_tokens=1)  # what the first turn spent is over it

    firing_id, _ = worker_turn(broker, workflow, generation, ids["lead"], "second")
    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FAILED and firing.error_code == "budget_exceeded"
    step = LlmStep.objects.get(firing_id=firing_id)
    assert step.state == LlmStep.State.FAILED and step.result is None  # claimed, and no provider call made
