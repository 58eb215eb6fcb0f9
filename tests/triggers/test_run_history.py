"""The run history names the trigger of every run a schedule or a webhook started, and filters by trigger: in the
API (`?trigger=<node id>` or `chat`, in the OpenAPI schema) and on the page (a select of the workflow's triggers
and "Chat")."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from chat.services import chat_message_send
from tests.triggers.helpers import both_triggers_workflow
from triggers.models import Schedule
from triggers.services import fire_deliver, schedules_sweep

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def history(owner, owner_client, inline, monkeypatch):
    """A workflow with three finished answers, newest first: a webhook's, the owner's own, a schedule's."""
    monkeypatch.setattr("triggers.services.enqueue_task", lambda *a, **kw: None)
    workflow, _, ids = both_triggers_workflow(owner)
    due = Schedule.objects.get(workflow=workflow).next_due_at
    (fire_id,) = schedules_sweep(now=due).fired
    assert fire_deliver(fire_id=fire_id).state == "fired"
    chat_message_send(workflow=workflow, text="my own question")
    url = owner_client.post(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/").json()["url"]
    delivery = Client().post(
        url[url.index("/hooks/") :], json.dumps({"title": "Printer on fire"}), content_type="application/json"
    )
    assert delivery.status_code == 202 and delivery.json()["state"] == "fired"
    return workflow, ids


def test_the_api_names_each_runs_trigger_and_filters_by_it(owner_client, history):
    workflow, ids = history
    path = f"/api/workflows/{workflow.pk}/runs/"
    runs = owner_client.get(path).json()
    assert [r["kind"] for r in runs] == ["chat", "chat", "chat"]
    assert [r["trigger"] for r in runs] == [
        {"node_id": ids["hook"], "label": "Webhook: Tickets"},
        None,
        {"node_id": ids["sched"], "label": "Scheduled: Morning"},
    ]
    only = {
        name: [r["prompt_preview"] for r in owner_client.get(path, {"trigger": value}).json()]
        for name, value in (("sched", ids["sched"]), ("hook", ids["hook"]), ("chat", "chat"))
    }
    assert only["hook"] == ["Ticket: Printer on fire"]
    assert only["chat"] == ["my own question"]
    assert len(only["sched"]) == 1 and only["sched"][0].startswith("Go Morning ")
    assert owner_client.get(path, {"trigger": "no-such-node"}).json() == []
    assert owner_client.get(path, {"trigger": "x" * 201}).status_code == 400


def test_a_try_again_of_a_triggered_message_is_named_after_the_trigger_too(owner_client, history):
    from chat.models import ChatMessage
    from chat.services.branches import chat_message_regenerate

    workflow, ids = history
    latest = ChatMessage.objects.filter(role="assistant").latest("pk")  # the answer to the webhook's turn
    chat_message_regenerate(workflow=workflow, message_id=latest.pk)
    runs = owner_client.get(f"/api/workflows/{workflow.pk}/runs/", {"trigger": ids["hook"]}).json()
    assert [r["trigger"]["label"] for r in runs] == ["Webhook: Tickets", "Webhook: Tickets"]


def test_the_schema_documents_the_trigger_filter(owner_client):
    schema = owner_client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/workflows/{workflow_id}/runs/"]["get"]
    (parameter,) = [p for p in operation["parameters"] if p["name"] == "trigger"]
    assert parameter["in"] == "query" and "chat" in parameter["description"]
    summary = schema["components"]["schemas"]["RunListItemOutput"]["properties"]
    assert "trigger" in summary


def test_the_page_names_the_trigger_and_its_select_filters(owner_client, client, owner, other_owner, history):
    workflow, ids = history
    client.force_login(owner)
    page = client.get(f"/workflows/{workflow.pk}/runs/")
    html = page.content.decode()
    assert page.status_code == 200
    assert [c["label"] for c in page.context["trigger_choices"]] == ["Chat", "Scheduled: Morning", "Webhook: Tickets"]
    assert html.count('class="run-trigger"') == 2
    assert "Scheduled: Morning</span> (gen 1)" in html and "Webhook: Tickets</span> (gen 1)" in html
    assert f'<option value="{ids["hook"]}">Webhook: Tickets</option>' in html

    filtered = client.get(f"/workflows/{workflow.pk}/runs/", {"trigger": ids["hook"]})
    assert [r["prompt_preview"] for r in filtered.context["runs"]] == ["Ticket: Printer on fire"]
    assert f'<option value="{ids["hook"]}" selected>' in filtered.content.decode()
    chat_only = client.get(f"/workflows/{workflow.pk}/runs/", {"trigger": "chat"})
    assert [r["prompt_preview"] for r in chat_only.context["runs"]] == ["my own question"]
    # Not one of the choices: every run.
    assert len(client.get(f"/workflows/{workflow.pk}/runs/", {"trigger": "nope"}).context["runs"]) == 3

    detail = client.get(f"/workflows/{workflow.pk}/runs/{filtered.context['runs'][0]['id']}/")
    assert 'Started by <span class="run-trigger">Webhook: Tickets</span>' in detail.content.decode()

    client.force_login(other_owner)
    assert client.get(f"/workflows/{workflow.pk}/runs/", {"trigger": ids["hook"]}).status_code == 404


def test_another_owner_gets_404_from_the_filtered_api(other_client, history):
    workflow, ids = history
    assert other_client.get(f"/api/workflows/{workflow.pk}/runs/", {"trigger": ids["hook"]}).status_code == 404
