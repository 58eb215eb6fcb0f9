"""Issue 20: an `Idempotency-Key` on an owner action that starts work answers the first result again and starts
nothing twice, also when the two requests race."""

from __future__ import annotations

import threading

import pytest
from rest_framework.test import APIClient

from agents.models import Firing
from chat.models import ChatRun
from core.models import IdempotencyReceipt
from tests.chat.helpers import chat_workflow
from workflows.models import WorkflowGeneration

pytestmark = pytest.mark.django_db(transaction=True)


def chat_url(workflow) -> str:
    return f"/api/workflows/{workflow.pk}/chat/"


def post(client, url, body=None, key=None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(url, body or {}, format="json", **headers)


def test_a_repeated_key_on_try_again_starts_one_run(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner)
    url = chat_url(workflow)
    sent = post(owner_client, url + "messages/", {"text": "hello"}).json()
    answer = ChatRun.objects.get(pk=sent["run"]["id"]).reply_message_id
    runs, firings = ChatRun.objects.count(), Firing.objects.count()
    first = post(owner_client, url + f"messages/{answer}/regenerate/", key="try-again-1")
    again = post(owner_client, url + f"messages/{answer}/regenerate/", key="try-again-1")
    assert first.status_code == again.status_code == 201, (first.content, again.content)
    assert again.json() == first.json() and again["Idempotency-Replayed"] == "true"
    assert ChatRun.objects.count() == runs + 1 and Firing.objects.count() == firings + 1
    # Without the key (or with another one) the action runs again: the key is what makes it a retry.
    other = post(owner_client, url + f"messages/{answer}/regenerate/", key="try-again-2")
    assert other.status_code in (201, 400, 409) and ChatRun.objects.count() >= runs + 1


def test_a_repeated_key_on_send_edit_and_switch_answers_the_first_result(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner)
    url = chat_url(workflow)
    sent = post(owner_client, url + "messages/", {"text": "one"}, key="send-1")
    replay = post(owner_client, url + "messages/", {"text": "one"}, key="send-1")
    assert sent.status_code == replay.status_code == 201 and replay.json() == sent.json()
    assert ChatRun.objects.filter(session__workflow=workflow).count() == 1
    message = sent.json()["message_id"]

    runs = ChatRun.objects.count()
    edited = post(owner_client, url + f"messages/{message}/edit/", {"text": "ONE"}, key="edit-1")
    edited_again = post(owner_client, url + f"messages/{message}/edit/", {"text": "ONE"}, key="edit-1")
    assert edited.status_code == 201 and edited_again.json() == edited.json()
    assert ChatRun.objects.count() == runs + 1

    switched = post(owner_client, url + f"messages/{message}/switch/", {}, key="switch-1")
    switched_again = post(owner_client, url + f"messages/{message}/switch/", {}, key="switch-1")
    assert switched.status_code == 200 and switched_again.json() == switched.json()
    assert ChatRun.objects.count() == runs + 1


def test_start_and_reset_with_a_repeated_key_admit_one_generation(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner, start=False)
    base = f"/api/workflows/{workflow.pk}/"
    started = post(owner_client, base + "start/", key="start-1")
    assert post(owner_client, base + "start/", key="start-1").json() == started.json()
    reset = post(owner_client, base + "reset/", key="reset-1")
    replay = post(owner_client, base + "reset/", key="reset-1")
    assert reset.status_code == replay.status_code == 200 and replay.json() == reset.json()
    assert WorkflowGeneration.objects.filter(workflow=workflow).count() == 2


def test_a_key_reused_for_another_request_is_a_409_and_a_bad_key_a_400(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner)
    url = chat_url(workflow)
    assert post(owner_client, url + "messages/", {"text": "one"}, key="k-1").status_code == 201
    reused = post(owner_client, url + "messages/", {"text": "two"}, key="k-1")
    assert reused.status_code == 409 and reused.json()["code"] == "idempotency_key_reused"
    bad = post(owner_client, url + "messages/", {"text": "two"}, key="not a key!")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_idempotency_key"
    assert ChatRun.objects.filter(session__workflow=workflow).count() == 1


def test_a_refused_or_failed_action_keeps_no_receipt(owner, owner_client, inline):
    from unittest import mock

    from django.db import OperationalError

    workflow, _, _ = chat_workflow(owner)
    url = chat_url(workflow)
    refused = post(owner_client, url + "messages/999999/regenerate/", key="r-1")
    assert refused.status_code in (400, 404) and not IdempotencyReceipt.objects.filter(key="r-1").exists()
    sent = post(owner_client, url + "messages/", {"text": "now it is fine"}, key="r-1")
    assert sent.status_code == 201  # the refused request left nothing behind, so the key is still free
    with mock.patch("chat.services.chat_message_send", side_effect=OperationalError("down")):
        failed = post(owner_client, url + "messages/", {"text": "x"}, key="f-1")
    assert failed.status_code == 503 and not IdempotencyReceipt.objects.filter(key="f-1").exists()
    retried = post(owner_client, url + "messages/", {"text": "x"}, key="f-1")
    assert retried.status_code == 201 and "Idempotency-Replayed" not in retried


def test_two_racing_requests_with_one_key_start_one_run(owner, inline):
    workflow, _, _ = chat_workflow(owner)
    url = chat_url(workflow)
    from accounts.tokens import api_token_create

    token = api_token_create(user=owner, name="race").raw_key
    results, barrier = [], threading.Barrier(2)

    def send():
        from django.db import connection

        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        barrier.wait()
        try:
            results.append(post(client, url + "messages/", {"text": "race"}, key="race-1"))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(r.status_code for r in results) == [201, 201], [r.content for r in results]
    assert results[0].json() == results[1].json()
    assert ChatRun.objects.filter(session__workflow=workflow).count() == 1
