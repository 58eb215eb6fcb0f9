"""A firing's steps continue in the worker that committed the previous one; what is lost there is found again.

These run the step functions the way a Celery task does (`dispatch.running_steps`), with the broker replaced by
a list of what would have been sent, so each test can drop, replay or hand over a step on purpose.
"""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from agents import dispatch
from agents.models import Firing, LlmStep, ToolCallResult
from agents.services.execute import execute_llm_step
from agents.services.firings import firing_start
from agents.services.messages import firing_messages
from agents.services.persist import persist_turn
from agents.services.prepare import prepare_payload
from agents.services.watchdog import watchdog_sweep
from conversations.models import UsageRecord
from conversations.store import conversation_key, load_conversation
from tests.agents.factories import agent_node, assistant_with, edge, started_workflow

pytestmark = pytest.mark.django_db(transaction=True)


def run_as_task(name: str, *args) -> None:
    """What agents.tasks does with a delivered message: early-acknowledged tasks continue in-process."""
    if name == "agent.persist_turn":
        dispatch.step_function(name)(*args)
        return
    with dispatch.running_steps():
        dispatch.step_function(name)(*args)


def _tool_results(messages):
    return [b for m in messages for b in m["blocks"] if b["type"] == "tool_result"]


def test_one_task_runs_a_whole_tool_loop_and_sends_nothing_more(owner, broker):
    workflow, generation, ids = assistant_with(owner, memory=True)
    firing_id = firing_start(
        workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="remember: the boat is blue"
    )
    assert broker == [("agent.prepare_payload", (str(firing_id),))]
    broker.clear()

    run_as_task("agent.prepare_payload", str(firing_id))

    assert broker == []  # execute 1, persist 1, execute 2 and persist 2 ran in this process
    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    assert list(LlmStep.objects.filter(firing=firing).values_list("iteration", "state")) == [
        (1, LlmStep.State.PERSISTED),
        (2, LlmStep.State.PERSISTED),
    ]
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]


def test_a_step_function_called_outside_a_task_sends_its_continuation(owner, broker):
    workflow, generation, ids = assistant_with(owner)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    broker.clear()
    prepare_payload(firing_id)  # not inside running_steps: nothing to continue in
    assert broker == [("agent.execute_llm_step", (firing_id, 1))]


def test_a_continuation_lost_before_its_claim_is_restarted_by_the_watchdog_once(owner, broker, settings):
    workflow, generation, ids = assistant_with(owner)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    broker.clear()
    prepare_payload(firing_id)
    broker.clear()  # the worker died between prepare's commit and the claim of step 1: nothing will run it

    assert watchdog_sweep()["restarted_steps"] == 0  # still within the grace period
    Firing.objects.filter(pk=firing_id).update(updated_at=timezone.now() - timedelta(minutes=1))
    assert watchdog_sweep()["restarted_steps"] == 1
    assert broker == [("agent.execute_llm_step", (firing_id, 1))]
    assert watchdog_sweep()["restarted_steps"] == 0  # once per grace period, however long the queue is
    Firing.objects.filter(pk=firing_id).update(updated_at=timezone.now() - timedelta(minutes=1))
    assert watchdog_sweep()["restarted_steps"] == 1  # still not started a period later: sent again
    for name, args in list(broker):  # both arrive: the claim of step 1 lets one call the provider
        run_as_task(name, *args)

    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FINISHED
    assert LlmStep.objects.filter(firing_id=firing_id).count() == 1
    assert UsageRecord.objects.filter(workflow_id=workflow.pk, kind="llm").count() == 1
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    assert watchdog_sweep()["restarted_steps"] == 0


def test_a_prepare_lost_with_its_worker_is_sent_again_once_per_grace_period(owner, broker, settings):
    workflow, generation, ids = assistant_with(owner)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    broker.clear()  # the worker that took agent.prepare_payload (acknowledged early) died before its commit
    assert watchdog_sweep()["resent_prepares"] == 0
    # A few seconds, not the persist grace: a broker restarted empty lost the message, the firing is safe here.
    Firing.objects.filter(pk=firing_id).update(
        updated_at=timezone.now() - timedelta(seconds=settings.AGENT_QUEUED_RESEND_SECONDS + 1)
    )
    assert watchdog_sweep()["resent_prepares"] == 1
    assert watchdog_sweep()["resent_prepares"] == 0
    assert broker == [("agent.prepare_payload", (firing_id,))]
    run_as_task("agent.prepare_payload", firing_id)
    run_as_task("agent.prepare_payload", firing_id)  # a duplicate finds the firing prepared and returns
    assert Firing.objects.get(pk=firing_id).state == Firing.State.FINISHED
    assert LlmStep.objects.filter(firing_id=firing_id).count() == 1


def test_a_firing_waiting_for_its_conversation_lease_is_not_taken_for_lost(owner, broker, settings):
    from conversations.store import acquire_firing_lease

    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    assert acquire_firing_lease(key, owner_token="someone-else", ttl_seconds=600)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    Firing.objects.filter(pk=firing_id).update(updated_at=timezone.now() - timedelta(minutes=1))
    broker.clear()
    run_as_task("agent.prepare_payload", firing_id)  # busy: it re-queues itself with a countdown
    assert [name for name, _ in broker] == ["agent.prepare_payload"]
    assert Firing.objects.get(pk=firing_id).state == Firing.State.QUEUED
    assert watchdog_sweep()["resent_prepares"] == 0


def test_a_firing_waiting_for_its_compaction_is_not_restarted(owner, broker, settings):
    settings.AGENT_STEP_LOST_AFTER_SECONDS = 3600  # a compaction that is still beating, as far as this test goes
    workflow, generation, ids = assistant_with(owner)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    prepare_payload(firing_id)
    broker.clear()
    Firing.objects.filter(pk=firing_id).update(
        compaction_pending=True, updated_at=timezone.now() - timedelta(minutes=1)
    )
    swept = watchdog_sweep()
    assert swept["restarted_steps"] == 0 and swept["resumed_after_lost_compactions"] == 0
    execute_llm_step(firing_id, 1)  # a stray delivery: the compaction continues this firing, not it
    assert not LlmStep.objects.filter(firing_id=firing_id).exists()


def test_a_persist_delivered_again_after_its_commit_adds_the_tool_results_once(owner, broker):
    workflow, generation, ids = assistant_with(owner, memory=True)
    firing_id = str(
        firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="remember: tea at four"
        )
    )
    broker.clear()
    prepare_payload(firing_id)
    execute_llm_step(firing_id, 1)
    assert broker == [("agent.execute_llm_step", (firing_id, 1)), ("agent.persist_turn", (firing_id, 1))]
    broker.clear()
    persist_turn(firing_id, 1)
    assert broker == [("agent.execute_llm_step", (firing_id, 2))]
    after_first = firing_messages(Firing.objects.get(pk=firing_id))

    persist_turn(firing_id, 1)  # a redelivered message, a watchdog's or a teammate's late return

    assert firing_messages(Firing.objects.get(pk=firing_id)) == after_first
    assert broker == [("agent.execute_llm_step", (firing_id, 2))]  # nothing new sent
    run_as_task("agent.execute_llm_step", firing_id, 2)
    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FINISHED
    assert ToolCallResult.objects.filter(firing_id=firing_id).count() == 1
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert len(_tool_results(stored)) == 1
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]


def test_a_continued_persist_failing_on_the_database_is_handed_to_the_broker(owner, broker, monkeypatch):
    workflow, generation, ids = assistant_with(owner)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    broker.clear()
    real_persist = persist_turn
    failures = []

    def persist_failing_once(*args):
        if not failures:
            failures.append(args)
            raise OperationalError("connection lost")
        return real_persist(*args)

    monkeypatch.setitem(dispatch._steps, "agent.persist_turn", persist_failing_once)  # the step table itself

    run_as_task("agent.prepare_payload", firing_id)  # does not raise: prepare's own work is committed

    assert failures == [(firing_id, 1)]
    assert broker == [("agent.persist_turn", (firing_id, 1))]  # Celery's retry policy applies from here
    assert LlmStep.objects.get(firing_id=firing_id).state == LlmStep.State.COMPLETED
    run_as_task(*broker[0][:1], *broker[0][1])
    assert Firing.objects.get(pk=firing_id).state == Firing.State.FINISHED
    assert UsageRecord.objects.filter(workflow_id=workflow.pk, kind="llm").count() == 1


def test_a_step_continued_from_a_committed_firing_still_sees_a_stop_that_came_in_between(owner, broker):
    from agents.services.firings import firing_request_stop

    workflow, generation, ids = assistant_with(owner)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    prepare_payload(firing_id)
    committed = Firing.objects.select_related("workflow").get(pk=firing_id)  # as prepare left it
    assert firing_request_stop(firing_id=firing_id)

    execute_llm_step(firing_id, 1, committed=committed)

    assert not LlmStep.objects.filter(firing_id=firing_id).exists()  # no claim, no provider call
    assert Firing.objects.get(pk=firing_id).state == Firing.State.STOPPED


def test_a_step_continued_from_a_committed_firing_does_not_run_twice(owner, broker):
    workflow, generation, ids = assistant_with(owner)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    prepare_payload(firing_id)
    committed = Firing.objects.select_related("workflow").get(pk=firing_id)
    broker.clear()
    execute_llm_step(firing_id, 1)  # the watchdog's copy got there first
    execute_llm_step(firing_id, 1, committed=committed)
    assert LlmStep.objects.filter(firing_id=firing_id).count() == 1
    assert broker == [("agent.persist_turn", (firing_id, 1))]  # one answer to persist


def test_only_early_acknowledged_tasks_continue_in_process(owner, broker):
    """A late-acknowledged message held through a provider call would leave the worker exposed to the broker
    connection dropping (the Redis transport dies putting it back), so persist sends its next step."""
    from agents import tasks

    assert not tasks.prepare_payload.acks_late and not tasks.execute_llm_step.acks_late
    assert tasks.execute_llm_step.max_retries == 0
    assert tasks.persist_turn.acks_late and tasks.compact_context.acks_late

    workflow, generation, ids = assistant_with(owner, memory=True)
    firing_id = str(
        firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="remember: the gate code is 42"
        )
    )
    broker.clear()
    prepare_payload(firing_id)
    execute_llm_step(firing_id, 1)
    broker.clear()
    tasks.persist_turn.run(firing_id, 1)  # as a worker runs a delivered agent.persist_turn
    assert broker == [("agent.execute_llm_step", (firing_id, 2))]
    tasks.execute_llm_step.run(firing_id, 2)  # early-acknowledged: step 2's persist runs right here
    assert broker == [("agent.execute_llm_step", (firing_id, 2))]
    assert Firing.objects.get(pk=firing_id).state == Firing.State.FINISHED


def test_a_teammate_task_over_the_prompt_limit_is_an_error_the_model_sees(owner, broker, settings, provider_requests):
    # firing_start refuses such a prompt; refused inside persist it rolled the turn back on every retry, and the
    # firing hung until its deadline. The model gets a tool error instead and the firing goes on.
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Lead"),
        agent_node("a", "Alice"),
    ]
    edges = [edge("trigger", "output-main", "lead", "input-main"), edge("a", "output-tool", "lead", "input-tools")]
    workflow, generation, ids = started_workflow(owner, nodes, edges)
    firing_id = str(
        firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="ask alice: " + "x" * 300
        )
    )
    settings.AGENT_MAX_PROMPT_CHARS = 200  # the lead's own prompt was admitted; its teammate task is too long
    broker.clear()
    run_as_task("agent.prepare_payload", firing_id)
    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FINISHED, (firing.state, firing.error_code, broker)
    assert not Firing.objects.filter(parent_id=firing_id).exists()
    (result,) = [b for m in provider_requests[-1] for b in m["blocks"] if b["type"] == "tool_result"]
    assert result["is_error"] and "at most 200" in result["content"]


def test_a_worker_that_is_shutting_down_hands_the_next_steps_to_the_broker(owner, broker, monkeypatch):
    # A warm shutdown waits for the running step only; the firing's next steps go to another worker.
    from celery.signals import worker_shutting_down

    monkeypatch.setattr(dispatch._stopping, "value", 0)
    worker_shutting_down.send(sender="test-worker", sig="SIGTERM", how="Warm", exitcode=0)
    assert dispatch.worker_stopping()

    workflow, generation, ids = assistant_with(owner)
    firing_id = str(firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello"))
    broker.clear()
    run_as_task("agent.prepare_payload", firing_id)
    assert broker == [("agent.execute_llm_step", (firing_id, 1))]
    assert Firing.objects.get(pk=firing_id).state == Firing.State.RUNNING
    assert not LlmStep.objects.filter(firing_id=firing_id).exists()

    monkeypatch.setattr(dispatch._stopping, "value", 0)  # another worker takes it from the broker
    name, args = broker.pop()
    run_as_task(name, *args)
    assert Firing.objects.get(pk=firing_id).state == Firing.State.FINISHED


def _firing_waiting_for_its_compaction(owner, broker):
    """A firing between two tool steps whose turn crossed the compaction threshold: its `agent.compact_context`
    was sent (kept in `broker`, not run) and it waits with `compaction_pending`."""
    workflow, generation, ids = assistant_with(owner, todos=True, compaction_threshold=0.1)
    bulky = "background " * 1500  # ~4,000 tokens: past 10% of the offline model's window
    first = str(
        firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="first: " + bulky)
    )
    run_as_task("agent.prepare_payload", first)
    # The first turn's own compaction (nothing older than its turn to summarise) frees the conversation's slot.
    for name, args in [sent for sent in broker if sent[0] == "agent.compact_context"]:
        run_as_task(name, *args)
    broker.clear()
    firing_id = str(
        firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="todo: buy milk\n" + bulky
        )
    )
    broker.clear()
    run_as_task("agent.prepare_payload", firing_id)
    [(name, compaction_args)] = broker
    assert name == "agent.compact_context" and compaction_args[3] == firing_id
    broker.clear()
    assert Firing.objects.get(pk=firing_id).compaction_pending
    return workflow, generation, ids, firing_id, compaction_args


def test_a_compaction_lost_with_its_worker_is_found_and_the_firing_continues_without_it(owner, broker, settings):
    workflow, generation, ids, firing_id, compaction_args = _firing_waiting_for_its_compaction(owner, broker)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    before = load_conversation(key)

    assert watchdog_sweep()["resumed_after_lost_compactions"] == 0  # not silent long enough yet
    silent_since = timezone.now() - timedelta(seconds=settings.AGENT_STEP_LOST_AFTER_SECONDS + 1)
    Firing.objects.filter(pk=firing_id).update(updated_at=silent_since)
    assert watchdog_sweep()["resumed_after_lost_compactions"] == 1
    assert watchdog_sweep()["resumed_after_lost_compactions"] == 0  # once
    assert broker == [("agent.execute_llm_step", (firing_id, 2))]
    name, args = broker.pop()
    run_as_task(name, *args)

    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    assert not firing.compaction_pending
    stored = load_conversation(key)
    assert stored[: len(before)] == before  # not compacted: no summary was asked for
    assert [m["role"] for m in stored[len(before) :]] == ["assistant"]  # the step after the tool results
    # Whether the lost summary call was made is not known: the ledger says so, once.
    compactions = UsageRecord.objects.filter(workflow_id=workflow.pk, kind="compaction")
    assert list(compactions.values_list("outcome", flat=True)) == ["ambiguous"]

    # The lost task arrives after all (a redelivery): the firing no longer waits for it, so nothing is compacted.
    run_as_task("agent.compact_context", *compaction_args)
    assert load_conversation(key) == stored
    assert list(compactions.values_list("outcome", flat=True)) == ["ambiguous"]
    # ...and frees the conversation's compaction slot it was claimed with: the next turn may ask at once.
    from conversations.models import ConversationCompaction

    assert ConversationCompaction.objects.get(agent_node_id=ids["lead"]).state == "idle"


def test_a_slow_compaction_beats_and_is_left_alone(owner, broker, settings, monkeypatch):
    import providers
    from conversations.store import COMPACTION_SUMMARY_HEADER
    from tests.waiting import wait_until

    settings.AGENT_STEP_HEARTBEAT_SECONDS = 0.05
    workflow, generation, ids, firing_id, compaction_args = _firing_waiting_for_its_compaction(owner, broker)
    real_summarize = providers.summarize
    silent_since = timezone.now() - timedelta(seconds=settings.AGENT_STEP_LOST_AFTER_SECONDS + 1)
    swept = {}

    def slow_summarizer(**kwargs):
        # Mid-summary, the firing's row is made to look silent; the compaction's beat must touch it again before
        # the watchdog looks.
        Firing.objects.filter(pk=firing_id).update(updated_at=silent_since)
        wait_until(
            lambda: Firing.objects.get(pk=firing_id).updated_at > silent_since, what="the compaction's heartbeat"
        )
        swept.update(watchdog_sweep())
        return real_summarize(**kwargs)

    monkeypatch.setattr(providers, "summarize", slow_summarizer)
    run_as_task("agent.compact_context", *compaction_args)

    assert swept["resumed_after_lost_compactions"] == 0
    firing = Firing.objects.get(pk=firing_id)
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert stored[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
