"""Spending limits stop a trigger's turns as they stop the owner's: once the owner's limit is reached, the next
scheduled firing and a webhook delivery each end with `budget_exceeded` (in the run history, in the chat, and in
the webhook's GET on its run id), and no request reaches the provider."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client

from accounts.models import SpendingLimit
from chat.models import ChatRun
from tests.accounts.test_budget import spend
from tests.fakes import FakeChatCompletions, Text, Turn
from tests.triggers.helpers import both_triggers_workflow
from triggers.models import Schedule, TriggerFire
from triggers.services import fire_deliver, schedules_sweep

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(monkeypatch, settings):
    settings.AGENT_EXECUTION_MODE = "inline"
    monkeypatch.setattr("triggers.services.enqueue_task", lambda *a, **kw: None)
    with FakeChatCompletions() as server:
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-test-0123456789abcdef")
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", server.base_url)
        yield server


def sweep_and_deliver(due) -> TriggerFire:
    (fire_id,) = schedules_sweep(now=due).fired
    return fire_deliver(fire_id=fire_id)


def test_a_reached_limit_stops_the_next_scheduled_and_webhook_turns_with_budget_exceeded(
    owner, owner_client, client, fake
):
    SpendingLimit.objects.create(user=owner, daily_tokens=1000)
    workflow, _, ids = both_triggers_workflow(
        owner, schedule={"every_minutes": 1}, provider="openai_compatible", model="qwen3"
    )
    url = owner_client.post(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/").json()["url"]
    hook_path = url[url.index("/hooks/") :]
    due = Schedule.objects.get(workflow=workflow).next_due_at

    # Under the limit, the schedule's turn reaches the provider.
    fake.push(Turn([Text("Good morning.")]))
    first = sweep_and_deliver(due)
    assert ChatRun.objects.get(pk=first.chat_run_id).state == ChatRun.State.FINISHED
    assert len(fake.requests) == 1

    spend(owner, workflow, tokens=1000)  # the owner's daily limit is reached

    # The next scheduled firing: a turn in the chat, refused before any provider request.
    second = sweep_and_deliver(due + timedelta(minutes=1))
    assert second.state == "fired"
    run = ChatRun.objects.get(pk=second.chat_run_id)
    assert run.state == ChatRun.State.ERROR and run.error_code == "budget_exceeded"
    assert "daily spending limit of your account" in run.reply_message.text

    # A webhook delivery: 202 with its run id, and its GET says the turn ended with budget_exceeded.
    delivery = Client().post(hook_path, json.dumps({"title": "Printer on fire"}), content_type="application/json")
    assert delivery.status_code == 202 and delivery.json()["state"] == "fired"
    state = Client().get(f"{hook_path}runs/{delivery.json()['run_id']}/").json()
    assert state["turn"]["state"] == "error" and state["turn"]["error_code"] == "budget_exceeded"
    assert state["turn"]["outcome"] == "error" and "spending limit" in state["turn"]["answer"]

    assert len(fake.requests) == 1  # neither refused turn made a provider call

    # The run history: both refused runs, named after their triggers, failed with budget_exceeded.
    runs = owner_client.get(f"/api/workflows/{workflow.pk}/runs/").json()
    assert [(r["trigger"]["label"], r["state"], r["error_code"]) for r in runs] == [
        ("Webhook: Tickets", "failed", "budget_exceeded"),
        ("Scheduled: Morning", "failed", "budget_exceeded"),
        ("Scheduled: Morning", "finished", ""),
    ]
    client.force_login(owner)
    page = client.get(f"/workflows/{workflow.pk}/runs/")
    assert page.content.decode().count("failed: <code>budget_exceeded</code>") == 2
