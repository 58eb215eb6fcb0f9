"""Spending limits: an owner (or a workflow) over its limit gets `budget_exceeded` before any provider request."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.test import Client

from accounts.budget import budget_check, budget_reserve, period_starts
from accounts.models import BudgetReservation, SpendingLimit
from agents.models import Firing
from agents.services.editor_runs import firing_test_run
from chat.models import ChatRun
from chat.services.runs import chat_message_send
from conversations.selectors import usage_spent
from conversations.services import UsageEntry, usage_record_append
from tests.agents.factories import agent_node, edge, started_workflow
from tests.fakes import FakeChatCompletions, Text, Turn
from tests.race import Competitor, run_before, wait_until_waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(monkeypatch, settings):
    settings.AGENT_EXECUTION_MODE = "inline"
    with FakeChatCompletions() as server:
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-test-0123456789abcdef")
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", server.base_url)
        yield server


def provider_workflow(owner, name="budget"):
    workflow, _generation, _ids = started_workflow(
        owner,
        [
            {"id": "trigger", "type": "chatTrigger", "params": {}},
            agent_node("lead", "Lead", provider="openai_compatible", model="qwen3"),
        ],
        [edge("trigger", "output-main", "lead", "input-main")],
        name=name,
    )
    return workflow


def spend(owner, workflow, *, tokens: int, cost: str | None = None, key: str = "spent-1"):
    usage_record_append(
        entry=UsageEntry(
            idempotency_key=key,
            kind="llm",
            provider="openai_compatible",
            model="qwen3",
            outcome="ok",
            owner_id=owner.pk,
            workflow_id=workflow.pk,
            input_tokens=tokens // 2,
            output_tokens=tokens - tokens // 2,
            cost=cost,
        )
    )


def test_an_owner_over_the_daily_limit_gets_budget_exceeded_and_no_request_is_made(owner, other_owner, fake):
    SpendingLimit.objects.create(user=None, daily_tokens=1000)  # the staff default for every owner
    workflow = provider_workflow(owner)
    spend(owner, workflow, tokens=1000)

    _message, run, _ = chat_message_send(workflow=workflow, text="hello")
    run = ChatRun.objects.get(pk=run.pk)
    assert run.state == ChatRun.State.ERROR and run.error_code == "budget_exceeded"
    assert "daily spending limit" in run.reply_message.text and "No request was sent" in run.reply_message.text
    assert fake.requests == []

    # The other owner is under the same default: the provider answers them.
    fake.push(Turn([Text("Hi there.")]))
    other_workflow = provider_workflow(other_owner, name="other")
    _message, other_run, _ = chat_message_send(workflow=other_workflow, text="hello")
    other_run = ChatRun.objects.get(pk=other_run.pk)
    assert other_run.state == ChatRun.State.FINISHED, (other_run.error_code, other_run.error_message)
    assert len(fake.requests) == 1


def test_a_per_owner_override_raises_the_default(owner, fake):
    SpendingLimit.objects.create(user=None, daily_tokens=1000, monthly_cost=Decimal("5"))
    override = SpendingLimit.objects.create(user=owner, daily_tokens=5000)
    workflow = provider_workflow(owner)
    spend(owner, workflow, tokens=1000, cost="1.00")
    assert budget_check(owner_id=owner.pk, workflow_id=workflow.pk) is None

    spend(owner, workflow, tokens=10, cost="4.00", key="spent-2")  # the monthly cost default still applies
    exceeded = budget_check(owner_id=owner.pk, workflow_id=workflow.pk)
    assert (exceeded.scope, exceeded.period, exceeded.measure) == ("owner", "month", "cost")

    override.monthly_cost = Decimal("100")
    override.save()
    assert budget_check(owner_id=owner.pk, workflow_id=workflow.pk) is None


def test_a_workflow_limit_caps_that_workflow_only(owner, fake):
    capped = provider_workflow(owner, name="capped")
    free = provider_workflow(owner, name="free")
    SpendingLimit.objects.create(user=owner, workflow_id=capped.pk, daily_tokens=100)
    spend(owner, capped, tokens=100)
    spend(owner, free, tokens=100_000, key="spent-2")
    exceeded = budget_check(owner_id=owner.pk, workflow_id=capped.pk)
    assert exceeded is not None and exceeded.scope == "workflow"
    assert budget_check(owner_id=owner.pk, workflow_id=free.pk) is None

    _message, run, _ = chat_message_send(workflow=capped, text="hello")
    assert ChatRun.objects.get(pk=run.pk).error_code == "budget_exceeded"
    assert fake.requests == []


def test_calls_starting_while_one_is_running_count_its_reservation_so_the_limit_holds(owner, fake):
    """Issue 34: 20 simultaneous test runs with 100 tokens of room each passed the check before any was billed and
    spent 3,408 tokens over the limit. Now the running call's estimate is reserved before it starts: the calls that
    start while it runs are refused, and what is spent beyond the limit is the one admitted call's crossing."""
    SpendingLimit.objects.create(user=owner, daily_tokens=1000)
    workflows = [provider_workflow(owner, name=f"w{i}") for i in range(7)]
    spend(owner, workflows[0], tokens=900)  # 100 tokens of room left
    held = threading.Event()
    fake.push(Turn([Text("The first answer.")], input_tokens=400, output_tokens=100, hold_after_first_text=held))
    for _ in workflows[1:]:
        fake.push(Turn([Text("Another answer.")], input_tokens=400, output_tokens=100))

    first = Competitor(lambda: chat_message_send(workflow=workflows[0], text="hello")[1].pk, name="first").start()
    try:
        fake.wait_until_silent()  # the first call is streaming: nothing of it is billed yet
        # The others start meanwhile, as chat sends and as editor test runs (both gated the same way).
        chat_runs = [chat_message_send(workflow=w, text="hello")[1] for w in workflows[1:4]]
        test_firings = [firing_test_run(workflow=w, prompt="hello") for w in workflows[4:]]
    finally:
        held.set()
    first_run = ChatRun.objects.get(pk=first.result())

    assert first_run.state == ChatRun.State.FINISHED, (first_run.error_code, first_run.error_message)
    assert len(fake.requests) == 1  # the only call that started
    for run in ChatRun.objects.filter(pk__in=[r.pk for r in chat_runs]):
        assert run.error_code == "budget_exceeded"
        assert "reserved by calls still running" in run.reply_message.text
    for firing in Firing.objects.filter(pk__in=test_firings):
        assert firing.end_reason == "budget_exceeded"
    # The reservation rule: spent beyond the limit is at most what the admitted call used (it crossed the limit).
    spent = usage_spent(owner_id=owner.pk, since=period_starts()["day"])["tokens"]
    assert spent == 900 + 500
    # Billed, the call's reservation is settled: what is refused next is refused by what was spent.
    _message, later, _ = chat_message_send(workflow=workflows[1], text="again")
    later = ChatRun.objects.get(pk=later.pk)
    assert later.error_code == "budget_exceeded" and "reserved" not in later.reply_message.text
    assert not BudgetReservation.objects.filter(owner_id=owner.pk).exists()


def test_two_calls_reserving_at_the_same_moment_are_serialized_per_owner(owner, fake):
    """The check and the reservation are one step: a second call checking while the first is between its check and
    its reservation waits for it (forced here at that exact point), then counts what it reserved."""
    SpendingLimit.objects.create(user=owner, daily_tokens=1000)
    workflow = provider_workflow(owner)
    spend(owner, workflow, tokens=900)

    def reserve(key: str):
        return budget_reserve(owner_id=owner.pk, workflow_id=workflow.pk, key=key, tokens=500, cost=None)

    competitors = []

    def second_call_checks_now(*args, **kwargs):
        competitor = Competitor(lambda: reserve("llm-step:second"), name="second").start()
        wait_until_waiting_on_a_lock(pid=competitor.pid)  # it waits for the first call's lock, not its own check
        competitors.append(competitor)

    with run_before("accounts.budget._exceeded", second_call_checks_now):
        assert reserve("llm-step:first") is None
    refused = competitors[0].result()
    assert refused is not None and (refused.spent, refused.reserved, refused.limit) == (1400, 500, 1000)
    assert list(BudgetReservation.objects.values_list("idempotency_key", flat=True)) == ["llm-step:first"]


def test_the_usage_page_and_api_show_what_was_spent(owner, fake):
    SpendingLimit.objects.create(user=owner, daily_tokens=2000, monthly_cost=Decimal("10"))
    workflow = provider_workflow(owner)
    spend(owner, workflow, tokens=1234, cost="0.5")
    client = Client()
    client.force_login(owner)
    page = client.get("/settings/usage/").content.decode()
    assert "1234" in page and "2000" in page and "qwen3" in page and "0.5000" in page
    assert f'<a href="/workflows/{workflow.pk}/">budget</a>' in page  # by name while the workflow exists
    data = client.get("/api/usage/").json()
    today = next(row for row in data if row["period"] == "day")
    assert today["tokens"] == 1234 and today["token_limit"] == 2000
