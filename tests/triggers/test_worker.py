"""The schedule through the real processes: Celery beat sends `triggers.sweep`, a worker claims the due schedule and
delivers its fire as a chat turn, which the agent steps answer; the next due time's turn continues the same stored
conversation."""

from __future__ import annotations

import pytest
from django.utils import timezone

from chat.models import ChatRun
from tests.chat.helpers import stored, texts
from tests.processes import start_celery_worker
from tests.triggers.helpers import scheduled_workflow
from tests.waiting import wait_until
from triggers.models import Schedule, TriggerFire

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def finished_runs() -> list[ChatRun]:
    return list(ChatRun.objects.filter(state="finished").order_by("pk"))


def test_beat_fires_a_due_schedule_into_the_chat_and_the_next_turn_remembers_it(owner, tmp_path):
    workflow, generation, ids = scheduled_workflow(owner, every_minutes=60)
    worker = start_celery_worker(tmp_path, name="beat", beat=True, TRIGGERS_SWEEP_SECONDS="1")
    try:
        for turn in (1, 2):
            # Due now (instead of in an hour): the next sweep beat sends claims it.
            Schedule.objects.filter(workflow=workflow).update(next_due_at=timezone.now())
            wait_until(lambda n=turn: len(finished_runs()) == n, timeout=40, what=f"scheduled turn {turn}")
    finally:
        worker.stop()
    first, second = finished_runs()
    assert first.reply_message.text.startswith("I see 0 earlier messages. You said: Go Morning")
    assert second.reply_message.text.startswith("I see 2 earlier messages. You said: Go Morning")
    assert list(TriggerFire.objects.values_list("state", "chat_run_id")) == [
        ("fired", first.pk),
        ("fired", second.pk),
    ]
    assert len(texts(stored(workflow, generation, ids["lead"]))) == 5  # system + two turns
    # Each sweep moved the schedule an hour past its claim: nothing is due any more.
    assert Schedule.objects.get(workflow=workflow).next_due_at > timezone.now()
