"""Issue 20: rate limits per user (API, chat sends), per IP (login, token creation) and per socket; over the limit
the API answers JSON 429 `rate_limited` with Retry-After and a page a plain 429 with Retry-After."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import cache

from tests.chat.helpers import chat_workflow
from tests.realtime import SocketClient
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rates(settings):
    cache.clear()  # counters of earlier tests (user ids repeat after a flush) must not count here
    settings.THROTTLE_RATES = {**settings.THROTTLE_RATES}
    yield settings.THROTTLE_RATES
    cache.clear()


def test_the_api_limits_each_user_and_answers_429_json_with_retry_after(rates, owner_client, other_client):
    rates["user"] = "3/minute"
    statuses = [owner_client.get("/api/workflows/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = owner_client.get("/api/workflows/")
    assert refused["Content-Type"].startswith("application/json") and refused.json()["code"] == "rate_limited"
    assert 0 < int(refused["Retry-After"]) <= 60
    assert other_client.get("/api/workflows/").status_code == 200  # per user: another owner is not affected


def test_chat_sends_have_their_own_lower_limit(rates, owner, owner_client, inline):
    rates["chat_send"] = "2/minute"
    workflow, _, _ = chat_workflow(owner)
    url = f"/api/workflows/{workflow.pk}/chat/messages/"
    statuses = [owner_client.post(url, {"text": f"m{i}"}, format="json").status_code for i in range(3)]
    assert statuses == [201, 201, 429]
    assert owner_client.get(f"/api/workflows/{workflow.pk}/chat/").status_code == 200  # reading is not a send


def test_test_runs_count_against_the_chat_send_limit(rates, owner, owner_client, inline):
    rates["chat_send"] = "2/minute"
    workflow, _, _ = chat_workflow(owner)
    chat = f"/api/workflows/{workflow.pk}/chat/messages/"
    test_run = f"/api/workflows/{workflow.pk}/test-run/"
    assert owner_client.post(chat, {"text": "one"}, format="json").status_code == 201
    assert owner_client.post(test_run, {"prompt": "two"}, format="json").status_code == 202
    refused = owner_client.post(test_run, {"prompt": "three"}, format="json")
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert owner_client.post(chat, {"text": "four"}, format="json").status_code == 429  # one counter for both


def test_login_attempts_are_limited_per_ip(rates, client, make_user):
    rates["login"] = "2/minute"
    make_user("someone")
    for _ in range(2):
        assert client.post("/login/", {"username": "someone", "password": "wrong"}).status_code == 200
    refused = client.post("/login/", {"username": "someone", "password": "wrong"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    other_ip = client.post("/login/", {"username": "someone", "password": "wrong"}, REMOTE_ADDR="127.0.0.9")
    assert other_ip.status_code == 200
    assert client.get("/login/").status_code == 200  # showing the form is not an attempt


def test_token_creation_is_limited_per_ip(rates, owner_client):
    rates["token"] = "1/hour"
    assert owner_client.post("/api/tokens/", {"name": "one"}, format="json").status_code == 201
    refused = owner_client.post("/api/tokens/", {"name": "two"}, format="json")
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert int(refused["Retry-After"]) > 60
    assert owner_client.get("/api/tokens/").status_code == 200  # listing is not creating


def test_the_token_page_shares_the_token_creation_limit(rates, client, owner, owner_client):
    rates["token"] = "2/hour"
    client.force_login(owner)
    made = client.post("/settings/token/", {"action": "create", "name": "page", "expires_in_days": "30"})
    assert made.status_code == 302
    token_id = owner.api_tokens.get(name="page").pk
    replaced = client.post("/settings/token/", {"action": "replace", "token_id": token_id})
    assert replaced.status_code == 302  # replacing mints a key too: the second of two
    refused = client.post("/settings/token/", {"action": "create", "name": "third", "expires_in_days": "30"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 60
    assert owner_client.post("/api/tokens/", {"name": "api"}, format="json").status_code == 429  # one counter
    assert client.get("/settings/token/").status_code == 200  # showing the page is not creating


def test_a_socket_that_floods_messages_is_closed(settings, owner):
    settings.SOCKET_MESSAGE_LIMIT = 5
    workflow = Workflow.objects.create(owner=owner, name=f"w-{uuid.uuid4().hex[:6]}")
    socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner)
    assert socket.connect()
    try:
        assert socket.receive()["type"] == "hello"
        for _ in range(5):
            socket._run(socket.communicator.send_json_to({"type": "ping"}))
            assert socket.receive() == {"type": "pong"}
        socket._run(socket.communicator.send_json_to({"type": "ping"}))
        closed = socket._run(socket.communicator.receive_output(timeout=3))
        assert closed == {"type": "websocket.close", "code": 4429}
    finally:
        socket.connected = False
