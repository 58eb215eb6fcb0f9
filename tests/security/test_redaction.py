"""Secrets and contents stay where they belong (docs/security.md#redaction).

Canaries are planted as a provider API key, a memory item's content, a tool result and a thinking signature; then
a chat turn with tool calls runs inline (the offline provider's `remember:` / `recall:` commands). None of the
canaries may appear in the log output, the workflow export, /healthz, error pages and API error bodies, or the
metadata-only socket events (`context.updated`, `memory.updated`), nor anything the product keeps in Redis.

The broker side (task payloads carry ids only) is
tests/agents/test_worker_firings.py::test_task_payloads_carry_ids_only.
"""

from __future__ import annotations

import json
import logging
import secrets

import pytest

import opencompany.asgi  # noqa: F401 - its django.setup() reconfigures logging; done at collection, not under caplog
from conversations.store import conversation_key, load_conversation, save_conversation
from core.logfmt import KeyValueFormatter
from memory.models import MemoryItem
from memory.services import memory_item_remember, memory_namespace_get_or_create
from tests.security.helpers import open_socket

pytestmark = pytest.mark.django_db(transaction=True)

# New per test run: a Redis or a log kept from an earlier run (a reused data folder) cannot hold these.
_RUN = secrets.token_hex(3)
API_KEY = f"sk-canaryapikey{_RUN}"
REMEMBERED = f"canaryremembered{_RUN}"  # the model remembers it: a tool argument and then a memory item's content
RECALLED = f"canarytoolresult{_RUN}"  # a planted memory the model recalls: it comes back in a tool result
SIGNATURE = f"canarysignature{_RUN}"  # a thinking block's signature in the stored conversation
OWNER_KEY = f"sk-canaryownerkey{_RUN}"  # an owner's own provider key (provider_keys), stored through the API
OWNER_BASE_KEY = f"sk-canaryownerbase{_RUN}"  # an owner's key for an OpenAI-compatible server
CANARIES = (API_KEY, REMEMBERED, RECALLED, SIGNATURE, OWNER_KEY, OWNER_BASE_KEY)
SECRETS = (API_KEY, SIGNATURE, OWNER_KEY, OWNER_BASE_KEY)  # never in a page, an API read or a socket frame
METADATA_EVENTS = ("context.updated", "memory.updated")


def leaked(text: str) -> list[str]:
    return [canary for canary in CANARIES if canary in text]


@pytest.fixture
def planted(world, settings, monkeypatch):
    """The world, with the canaries planted and one chat turn with tool calls run over them."""
    settings.OPENAI_API_KEY = API_KEY
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    namespace = memory_namespace_get_or_create(owner=world.owner, workflow=world.workflow, node_id=world.memory_node_id)
    memory_item_remember(namespace=namespace, content=f"The vault passphrase is {RECALLED}.", actor="owner")
    key = conversation_key(world.workflow.pk, world.generation, world.agent_node_id)
    stored = load_conversation(key)
    index = max(i for i, m in enumerate(stored) if m["role"] == "assistant")
    thinking = {"type": "thinking", "text": "thinking it over", "signature": SIGNATURE, "provider": "anthropic"}
    stored[index] = {**stored[index], "blocks": [thinking, *stored[index]["blocks"]]}  # loaded messages are read-only
    save_conversation(key, stored)
    from provider_keys.models import AllowedProviderHost
    from provider_keys.services import owner_provider_key_set

    owner_provider_key_set(owner=world.owner, provider="openai", api_key=OWNER_KEY)
    AllowedProviderHost.objects.get_or_create(host="llm.internal.test")
    owner_provider_key_set(
        owner=world.owner,
        provider="openai_compatible",
        api_key=OWNER_BASE_KEY,
        base_url="http://llm.internal.test/v1",
    )
    return world


def run_turn_with_tool_calls(world, caplog) -> list[dict]:
    """Send the turn while the owner's socket listens and every logger records at INFO; returns the socket events."""
    from chat.services.runs import chat_message_send

    with open_socket(f"/ws/workflows/{world.workflow.pk}/", user=world.owner) as socket:
        assert socket.connect()
        caplog.set_level(logging.INFO)
        chat_message_send(workflow=world.workflow, text=f"remember: {REMEMBERED}\nrecall: vault passphrase")
        # Read until the run ended and both metadata events came (a receive timeout would cancel the socket's loop).
        events, wanted = [], {"run.finished", *METADATA_EVENTS}
        while not wanted <= {event.get("type") for event in events}:
            events.append(socket.receive(timeout=15))
    return events


def test_canaries_reach_no_log_export_health_error_body_or_metadata_event(planted, caplog, client):
    world = planted
    events = run_turn_with_tool_calls(world, caplog)

    # The turn really handled every canary: remembered, recalled into a tool result, the signature kept.
    assert MemoryItem.objects.filter(content__contains=REMEMBERED).exists()
    stored = json.dumps(load_conversation(conversation_key(world.workflow.pk, world.generation, world.agent_node_id)))
    assert REMEMBERED in stored and RECALLED in stored and SIGNATURE in stored
    kinds = {event.get("type") for event in events}
    assert set(METADATA_EVENTS) <= kinds, kinds

    # Logs, as production formats them.
    formatter = KeyValueFormatter("%(levelname)s %(name)s %(message)s")
    lines = "\n".join(formatter.format(record) for record in caplog.records)
    assert caplog.records, "nothing was logged: the check would prove nothing"
    assert not leaked(lines), [line for line in lines.splitlines() if leaked(line)][:5]

    # Socket frames: metadata events and every other non-text frame carry no canary; the answer's own text deltas
    # may quote the owner's words and the tool results (that is the answer), but never a key or a signature.
    for event in events:
        frame = json.dumps(event)
        if event.get("type") == "run.delta":
            assert not [secret for secret in SECRETS if secret in frame], event
        else:
            assert not leaked(frame), event

    # The export, /healthz, error pages and API error bodies. (A 409 version_conflict hands the owner the current
    # item on purpose, through the owner-checked handler, so it is not among them.)
    client.force_login(world.owner)
    auth = {"HTTP_AUTHORIZATION": f"Token {world.owner_token}"}
    api = f"/api/workflows/{world.workflow.pk}/"
    item_id = MemoryItem.objects.get(content__contains=REMEMBERED).pk
    items = f"{api}memory/{world.memory_node_id}/items/"
    responses = {
        "export": client.get(api + "export/", **auth),
        "healthz": client.get("/healthz"),
        "404 api": client.get(f"{items}{item_id + 10_000}/", **auth),
        "404 page": client.get(f"/workflows/{world.workflow.pk + 10_000}/"),
        "400 api patch": client.patch(
            f"{items}{item_id}/", {"expected_version": 1, "tags": "not a list"}, content_type="application/json"
        ),
        "400 api too long": client.post(
            items, {"content": f"{REMEMBERED} " + "x" * 20_000}, content_type="application/json"
        ),
        "400 chat": client.post(api + "chat/messages/", {"text": ""}, content_type="application/json"),
    }
    assert responses["export"].status_code == 200
    assert responses["404 api"].status_code == 404 and responses["404 page"].status_code == 404
    assert responses["400 api patch"].status_code == 400 and responses["400 api too long"].status_code == 400
    assert responses["400 chat"].status_code == 400
    for name, response in responses.items():
        assert not leaked(response.content.decode(errors="replace")), (name, response.status_code)


def test_the_api_key_is_rendered_by_no_page_or_api_read(planted, client):
    from tests.security.test_access_matrix import API, MATRIX, PUBLIC

    world = planted
    client.force_login(world.owner)
    auth = {"HTTP_AUTHORIZATION": f"Token {world.owner_token}"}
    read = 0
    for route, entry in MATRIX.items():
        if "get" not in entry.methods:
            continue
        response = client.get(entry.url(world), **(auth if entry.kind == API else {}))
        assert response.status_code < 500 or route.startswith("healthz"), (route, response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content  # a file download
        content = body.decode(errors="replace")
        assert not [secret for secret in (API_KEY, OWNER_KEY, OWNER_BASE_KEY) if secret in content], route
        read += entry.kind != PUBLIC
    assert read >= 10


def redis_values(url: str) -> dict[str, str]:
    """Every key's value (strings, hashes, lists, sets, sorted sets) in the product's Redis database."""
    import redis

    client = redis.Redis.from_url(url)
    values = {}
    for key in client.scan_iter(count=500):
        kind = client.type(key).decode()
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        else:
            continue
        values[key.decode(errors="replace")] = repr(value)
    return values


def test_no_canary_is_left_in_redis(planted, caplog, settings):
    # Status caches, heartbeats, leases and epochs live in Redis; none may hold a key, a content or a signature.
    # (Channel-layer messages are the socket frames checked above; they are consumed by the owner's socket.)
    run_turn_with_tool_calls(planted, caplog)
    values = redis_values(settings.REDIS_URL)
    assert values, "Redis is empty: the check would prove nothing"
    found = {key: leaked(value) for key, value in values.items() if leaked(value) and not key.startswith("asgi")}
    assert not found, found


def test_an_owner_key_echoed_by_a_provider_error_reaches_no_row_log_or_event(world, settings, monkeypatch, caplog):
    """The owner's key is used for their agent; the provider refuses it and quotes it back (as OpenAI's "Incorrect
    API key provided: ..." does). The failure the owner sees, the logs, the step rows and the socket events hold no
    key."""
    from agents.models import Firing, LlmStep
    from agents.services.firings import firing_start
    from provider_keys.services import owner_provider_key_set
    from tests.agents.factories import assistant_with
    from tests.fakes import ErrorReply, FakeAnthropic

    settings.AGENT_EXECUTION_MODE = "inline"
    caplog.set_level(logging.INFO)
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        owner_provider_key_set(owner=world.owner, provider="anthropic", api_key=OWNER_KEY)
        workflow, generation, ids = assistant_with(world.owner, provider="anthropic", model="claude-sonnet-4-5")
        fake.push(ErrorReply(401, f"invalid x-api-key: {OWNER_KEY}", kind="authentication_error"))
        firing = Firing.objects.get(
            pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hi")
        )
        assert fake.presented_key(fake.requests[-1]) == OWNER_KEY  # the key really was used
    assert firing.state == Firing.State.FAILED and "invalid x-api-key" in firing.error_message
    assert OWNER_KEY not in firing.error_message
    steps = json.dumps([[s.error_code, s.result] for s in LlmStep.objects.filter(firing=firing)], default=str)
    assert OWNER_KEY not in steps
    formatter = KeyValueFormatter("%(levelname)s %(name)s %(message)s")
    assert not [r for r in caplog.records if OWNER_KEY in formatter.format(r)]
