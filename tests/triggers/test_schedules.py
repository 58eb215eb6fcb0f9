"""Schedule triggers end to end under an injected clock: Start sets the due time, the sweep fires it once into the
owner's chat, the turn continues the agent's stored conversation, and Stop/Start/Reset/delete keep the rows in step."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from chat.models import ChatMessage, ChatRun
from chat.selectors import chat_thread
from chat.services import chat_message_send
from tests.chat.helpers import stored, texts
from tests.race import Competitor, run_after
from tests.triggers.helpers import scheduled_workflow
from triggers.models import Schedule, TriggerFire
from triggers.services import fire_deliver, schedules_sweep
from workflows.services import workflow_reset, workflow_start, workflow_stop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch):
    """The fire ids the sweep hands to delivery, kept instead of sent to the broker."""
    kept: list[int] = []
    monkeypatch.setattr("triggers.services.enqueue_task", lambda name, *, args=(), **kw: kept.append(args[0]))
    return kept


def deliver(ids):
    return [fire_deliver(fire_id=pk) for pk in ids]


def test_start_sets_the_due_time_and_the_sweep_fires_it_once_into_the_chat(owner, inline, sent):
    workflow, generation, ids = scheduled_workflow(owner, every_minutes=5)
    row = Schedule.objects.get(workflow=workflow)
    assert row.generation == generation and row.next_due_at == row.anchor_at + timedelta(minutes=5)
    due = row.next_due_at

    assert schedules_sweep(now=due - timedelta(seconds=1)).fired == []  # not yet
    result = schedules_sweep(now=due)
    assert len(result.fired) == 1 and sent == result.fired
    row.refresh_from_db()
    assert row.next_due_at == due + timedelta(minutes=5) and row.last_fired_at == due
    assert schedules_sweep(now=due + timedelta(seconds=30)).fired == []  # the same due time never again

    (fire,) = deliver(result.fired)
    assert fire.state == "fired" and fire.missed == 0
    run = ChatRun.objects.get(pk=fire.chat_run_id)
    assert run.state == "finished" and run.agent_node_id == ids["lead"]
    message = run.user_message
    assert message.text.startswith("Go Morning ") and message.meta["trigger"]["kind"] == "schedule"
    thread = chat_thread(workflow=workflow)
    assert [m["trigger"] for m in thread["messages"]] == [{"kind": "schedule", "name": "Morning"}, None]
    # Delivered again (a retried task): the same message and run, nothing new.
    assert fire_deliver(fire_id=fire.pk).chat_run_id == run.pk
    assert ChatRun.objects.count() == 1


def test_the_second_scheduled_turn_continues_the_same_stored_conversation(owner, inline, sent):
    workflow, generation, ids = scheduled_workflow(owner, every_minutes=1)
    due = Schedule.objects.get(workflow=workflow).next_due_at
    deliver(schedules_sweep(now=due).fired)
    chat_message_send(workflow=workflow, text="and me in between")
    deliver(schedules_sweep(now=due + timedelta(minutes=1)).fired)
    replies = ChatMessage.objects.filter(role="assistant").order_by("pk")
    assert [r.text.split(".")[0] for r in replies] == [
        "I see 0 earlier messages",
        "I see 2 earlier messages",
        "I see 4 earlier messages",
    ]
    conversation = texts(stored(workflow, generation, ids["lead"]))
    assert conversation[1].startswith("Go Morning") and conversation[5].startswith("Go Morning")


def test_after_downtime_a_schedule_fires_once_and_says_how_many_it_missed(owner, inline, sent):
    workflow, _, _ = scheduled_workflow(owner, every_minutes=5)
    due = Schedule.objects.get(workflow=workflow).next_due_at
    result = schedules_sweep(now=due + timedelta(minutes=42))  # 9 due times passed: due, +5, ..., +40
    assert len(result.fired) == 1
    (fire,) = deliver(result.fired)
    assert fire.missed == 8 and fire.due_at == due
    row = Schedule.objects.get(workflow=workflow)
    assert row.next_due_at == due + timedelta(minutes=45) and row.last_missed == 8
    assert ChatRun.objects.count() == 1


def test_two_sweeps_racing_fire_a_due_time_once(owner, inline, sent):
    workflow, _, _ = scheduled_workflow(owner, every_minutes=5)
    due = Schedule.objects.get(workflow=workflow).next_due_at
    rivals: list[Competitor] = []

    def second_sweep(*args, **kwargs):
        # The first sweep holds the row it claimed (not yet committed); the second runs to its end meanwhile.
        rival = Competitor(lambda: schedules_sweep(now=due)).start()
        rivals.append(rival)
        rival.result()  # it finished without waiting on the claimed row

    with run_after("triggers.services.schedules_due_for_update", second_sweep):
        first = schedules_sweep(now=due)
    second = rivals[0].result()
    assert len(first.fired) == 1 and second.fired == [] and second.skipped == []
    assert TriggerFire.objects.count() == 1
    # And when the second comes after the first committed, the row is no longer due.
    assert schedules_sweep(now=due).fired == []


def test_a_busy_agent_queues_one_turn_and_records_the_rest_as_skipped(owner, broker, sent):
    workflow, _, _ = scheduled_workflow(owner, every_minutes=1)
    _, owners_run, _ = chat_message_send(workflow=workflow, text="a long question")  # held: the lane stays taken
    due = Schedule.objects.get(workflow=workflow).next_due_at
    (first,) = deliver(schedules_sweep(now=due).fired)
    assert first.state == "waiting"
    second = schedules_sweep(now=due + timedelta(minutes=1))
    assert second.fired == [] and len(second.skipped) == 1
    assert TriggerFire.objects.get(pk=second.skipped[0]).error_code == "busy"
    assert second.resent == [first.pk]  # the waiting one is handed again each sweep
    ChatRun.objects.filter(pk=owners_run.pk).update(state="finished")  # the owner's answer ended
    (again,) = deliver([first.pk])
    assert again.state == "fired" and again.chat_run_id != owners_run.pk


def test_stop_pauses_start_resumes_from_now_reset_clears_and_delete_removes(owner, inline, sent):
    workflow, _, _ = scheduled_workflow(owner, every_minutes=5)
    due = Schedule.objects.get(workflow=workflow).next_due_at
    workflow_stop(workflow=workflow)
    assert Schedule.objects.get(workflow=workflow).next_due_at is None
    assert schedules_sweep(now=due + timedelta(hours=1)).fired == []

    # Start again (a changed graph admits a new generation): due five minutes after this Start, not at the old time.
    workflow.refresh_from_db()
    workflow.revision += 1
    workflow.save(update_fields=["revision"])
    generation, created = workflow_start(workflow=workflow)
    row = Schedule.objects.get(workflow=workflow)
    assert created and row.generation == generation.number and row.next_due_at == row.anchor_at + timedelta(minutes=5)
    assert row.next_due_at > due

    # A fire waiting for its turn is dropped by Reset, and the schedule counts again from the reset.
    TriggerFire.objects.create(
        schedule=row, workflow_id=workflow.pk, node_id=row.node_id, kind="schedule", state="waiting"
    )
    outcome = workflow_reset(workflow=workflow)
    assert TriggerFire.objects.get().state == "skipped" and TriggerFire.objects.get().error_code == "reset"
    row.refresh_from_db()
    assert row.generation == outcome.generation.number and row.next_due_at is not None

    workflow.delete()
    assert not Schedule.objects.exists() and not TriggerFire.objects.exists()


def test_a_sweep_of_a_stopped_workflow_fires_nothing_even_if_a_fire_was_queued(owner, inline, sent):
    workflow, _, _ = scheduled_workflow(owner, every_minutes=5)
    due = Schedule.objects.get(workflow=workflow).next_due_at
    fired = schedules_sweep(now=due).fired
    workflow_stop(workflow=workflow)  # before delivery: the queued fire is dropped
    (fire,) = deliver(fired)
    assert fire.state == "skipped" and fire.error_code == "stopped"
    assert not ChatRun.objects.exists()
    assert connection.in_atomic_block is False
