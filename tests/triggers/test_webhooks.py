"""Webhook triggers through HTTP: the address shown once, a delivery becomes one turn in the owner's chat, retries
are no-ops, and every refusal is JSON with its status, no fire, and a counter."""

from __future__ import annotations

import json
import time

import pytest
from django.core.cache import cache
from django.test import Client

from chat.models import ChatMessage, ChatRun
from provider_keys.secrets import owner_secret_set
from tests.race import Competitor, run_before, wait_until_waiting_on_a_lock
from tests.triggers.helpers import webhook_workflow
from triggers.models import TriggerFire, Webhook
from triggers.webhooks import REFUSED_KEY, refusal_counts, sign
from workflows.services import workflow_delete, workflow_stop

pytestmark = pytest.mark.django_db(transaction=True)

TICKET = {"title": "Printer on fire", "items": [{"name": "HP 4000"}]}


@pytest.fixture
def hook(owner, owner_client):
    """(workflow, node ids, the hook's path) with a freshly issued address."""
    workflow, _, ids = webhook_workflow(owner)
    response = owner_client.post(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/")
    assert response.status_code == 201
    url = response.json()["url"]
    return workflow, ids, url[url.index("/hooks/") :]


def post_json(path, data, **headers):
    return Client().post(path, json.dumps(data), content_type="application/json", headers=headers)


def test_the_address_is_shown_once_and_regenerate_retires_the_old_one(owner_client, hook):
    workflow, ids, path = hook
    token = path.split("/")[2]
    assert len(token) >= 43  # 256 random bits, URL-safe base64
    state = owner_client.get(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/").json()
    assert state == {"exists": True, "hint": token[-4:], "url": None}
    assert Webhook.objects.get().token_hash != token  # only its digest is kept
    again = owner_client.post(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/").json()["url"]
    assert again[again.index("/hooks/") :] != path
    assert post_json(path, TICKET).status_code == 404


def test_a_delivery_becomes_one_turn_in_the_chat_and_its_retry_none(inline, hook):
    workflow, ids, path = hook
    response = post_json(path, TICKET, **{"Idempotency-Key": "d-1"})
    assert response.status_code == 202
    run_id = response.json()["run_id"]
    fire = TriggerFire.objects.get(pk=run_id)
    assert fire.state == "fired" and fire.kind == "webhook"
    message = ChatMessage.objects.get(role="user")
    assert message.text == "Ticket: Printer on fire / HP 4000"
    assert message.meta["trigger"]["name"] == "Tickets"

    retry = post_json(path, TICKET, **{"Idempotency-Key": "d-1"})
    assert retry.status_code == 202 and retry.json() == {"run_id": run_id, "state": "fired", "replayed": True}
    assert ChatRun.objects.count() == 1 and TriggerFire.objects.count() == 1

    state = Client().get(f"{path}runs/{run_id}/").json()
    assert state["state"] == "fired" and state["turn"]["state"] == "finished"
    assert state["turn"]["answer"] == "I see 0 earlier messages. You said: Ticket: Printer on fire / HP 4000"


def test_a_retry_racing_the_first_delivery_waits_for_it_and_answers_its_run(broker, hook):
    """The fire and its turn commit together: a retry with the same key that arrives meanwhile waits on the key's
    unique index, then answers the first run id, already handed to the chat, and starts nothing."""
    _, _, path = hook
    racing: list[Competitor] = []

    def retry_arrives(*args, **kwargs):
        rival = Competitor(lambda: post_json(path, TICKET, **{"Idempotency-Key": "same"}), name="retry").start()
        wait_until_waiting_on_a_lock(pid=rival.pid)  # on the first delivery's uncommitted fire
        racing.append(rival)

    with run_before("triggers.webhooks.fire_hand_over", retry_arrives):
        first = post_json(path, TICKET, **{"Idempotency-Key": "same"})
    retry = racing[0].result()
    assert first.status_code == 202 and first.json()["replayed"] is False
    assert retry.status_code == 202
    assert retry.json() == {"run_id": first.json()["run_id"], "state": "fired", "replayed": True}
    assert TriggerFire.objects.count() == 1 and ChatRun.objects.count() == 1


def test_a_form_body_maps_its_fields_too(inline, hook):
    _, _, path = hook
    response = Client().post(path, "title=Door+stuck&x=1", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 202
    assert ChatMessage.objects.get(role="user").text == "Ticket: Door stuck / "


def test_refusals_are_json_with_their_status_and_record_nothing(settings, inline, hook):
    _, _, path = hook
    before = refusal_counts()
    settings.TRIGGERS_WEBHOOK_MAX_BYTES = 1024
    assert post_json(path, {"x": "y" * 2000}).status_code == 413
    plain = Client().post(path, "hello", content_type="text/plain")
    assert plain.status_code == 415 and plain.json()["code"] == "unsupported_media_type"
    broken = Client().post(path, "{not json", content_type="application/json")
    assert broken.status_code == 400 and broken.json()["code"] == "invalid_json"
    assert post_json("/hooks/" + "A" * 43 + "/", TICKET).status_code == 404
    after = refusal_counts()
    assert {s: after[s] - before[s] for s in (413, 415, 400, 404)} == {413: 1, 415: 1, 400: 1, 404: 1}
    assert not TriggerFire.objects.exists() and not ChatRun.objects.exists()


def redis_ttl(key: str) -> int:
    """Seconds the cache key has left in Redis (-1: it never expires, -2: no such key)."""
    return cache._cache.get_client(key).ttl(cache.make_and_validate_key(key))


def test_refusal_counters_expire_with_their_window(settings):
    settings.TRIGGERS_WEBHOOK_REFUSED_WINDOW_SECONDS = 600
    now = time.time()
    before = refusal_counts(now=now)[404]
    assert post_json("/hooks/" + "C" * 43 + "/", TICKET).status_code == 404
    window = int(now) // 600
    key = REFUSED_KEY.format(status=404, window=window)
    if refusal_counts(now=now)[404] != before + 1:  # the window turned between the two reads: look at the new one
        key = REFUSED_KEY.format(status=404, window=window + 1)
    # It lives until its window ends (a second's margin, and Redis rounds its TTL), never for ever.
    assert 0 < redis_ttl(key) <= 600 - int(now) % 600 + 2
    # A later window counts afresh.
    assert refusal_counts(now=now + 600)[404] == 0


def test_a_hook_over_its_rate_answers_429_with_retry_after(settings, inline, hook):
    _, _, path = hook
    settings.TRIGGERS_WEBHOOK_RATE_PER_MINUTE = 2
    codes = [post_json(path, TICKET, **{"Idempotency-Key": f"k{i}"}).status_code for i in range(3)]
    if codes != [202, 202, 429]:  # the minute turned between the posts: count again in the new one
        codes = [post_json(path, TICKET, **{"Idempotency-Key": f"j{i}"}).status_code for i in range(3)]
    assert codes[-1] == 429
    response = post_json(path, TICKET)
    assert response.status_code == 429 and 1 <= int(response["Retry-After"]) <= 60
    assert response.json()["code"] == "rate_limited"


def test_a_signed_hook_checks_the_signature_and_the_time_window(owner, owner_client, inline):
    owner_secret_set(owner=owner, name="hook-secret", value="s3cret-value")
    workflow, _, ids = webhook_workflow(owner, signing_secret="hook-secret")
    url = owner_client.post(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/").json()["url"]
    path = url[url.index("/hooks/") :]
    body = json.dumps(TICKET).encode()
    now = int(time.time())

    def deliver(signature):
        return Client().post(
            path, body, content_type="application/json", headers={"X-OpenCompany-Signature": signature}
        )

    assert deliver("").status_code == 401
    assert deliver(sign("wrong-secret", body, stamp=now)).status_code == 401
    stale = deliver(sign("s3cret-value", body, stamp=now - 3600))
    assert stale.status_code == 401 and stale.json()["code"] == "stale_signature"
    assert not TriggerFire.objects.exists()
    good = deliver(sign("s3cret-value", body, stamp=now))
    assert good.status_code == 202
    run_id = good.json()["run_id"]
    # Reading the run needs the signature too (over an empty body).
    assert Client().get(f"{path}runs/{run_id}/").status_code == 401
    signed = Client().get(
        f"{path}runs/{run_id}/", headers={"X-OpenCompany-Signature": sign("s3cret-value", b"", stamp=now)}
    )
    assert signed.status_code == 200 and signed.json()["turn"]["state"] == "finished"


def test_stopped_or_deleted_workflow_and_another_owner_get_the_same_404(owner, other_client, hook):
    workflow, ids, path = hook
    assert other_client.post(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/").status_code == 404
    assert other_client.get(f"/api/workflows/{workflow.pk}/hooks/{ids['hook']}/").status_code == 404
    unknown = post_json("/hooks/" + "B" * 43 + "/", TICKET)
    workflow_stop(workflow=workflow)
    stopped = post_json(path, TICKET)
    assert stopped.status_code == 404 and stopped.json() == unknown.json()
    workflow_delete(workflow=workflow)
    assert post_json(path, TICKET).status_code == 404
    assert not TriggerFire.objects.exists()


def test_the_chat_api_marks_the_delivered_turn_with_its_trigger(inline, owner_client, hook):
    workflow, _, path = hook
    post_json(path, TICKET)
    messages = owner_client.get(f"/api/workflows/{workflow.pk}/chat/").json()["messages"]
    assert [m["trigger"] for m in messages] == [{"kind": "webhook", "name": "Tickets"}, None]


def test_a_delivery_while_the_agent_is_busy_waits_and_the_sweep_hands_it_again(owner, broker, hook, monkeypatch):
    from chat.services import chat_message_send
    from triggers.services import fire_deliver, schedules_sweep

    workflow, _, path = hook
    _, owners_run, _ = chat_message_send(workflow=workflow, text="a long question")  # held: the lane stays taken
    response = post_json(path, TICKET, **{"Idempotency-Key": "busy-1"})
    assert response.status_code == 202 and response.json()["state"] == "waiting"
    resent: list[int] = []
    monkeypatch.setattr("triggers.services.enqueue_task", lambda name, *, args=(), **kw: resent.append(args[0]))
    assert schedules_sweep().resent == [response.json()["run_id"]] == resent
    ChatRun.objects.filter(pk=owners_run.pk).update(state="finished")  # the owner's answer ended
    fire = fire_deliver(fire_id=resent[0])
    assert fire.state == "fired" and ChatRun.objects.get(pk=fire.chat_run_id).user_message.meta["trigger"]["kind"] == (
        "webhook"
    )
