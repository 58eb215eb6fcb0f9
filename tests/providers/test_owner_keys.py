"""Owners' own provider keys: encrypted at rest, write-only, used for their agents before the environment's key,
testable with one cheap call; owners' base URLs guarded against server-side request forgery."""

from __future__ import annotations

import socket

import pytest
from django.db import connection

from agents.models import Firing
from agents.services.firings import firing_start
from provider_keys import crypto
from provider_keys.models import AllowedProviderHost, OwnerProviderKey
from provider_keys.selectors import owner_request_overrides
from provider_keys.services import owner_provider_key_set, owner_provider_key_test
from providers.urlguard import UnsafeURLError, check_outbound_url
from tests.agents.factories import assistant_with
from tests.fakes import FakeAnthropic, FakeChatCompletions, RawReply, Text, Turn

pytestmark = pytest.mark.django_db(transaction=True)

OWNER_KEY = "sk-ant-owner-own-key-7c41d2"
SERVER_KEY = "sk-ant-server-key-0000"


def raw_column(row_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT encrypted_key FROM provider_keys_ownerproviderkey WHERE id = %s", [row_id])
        return cursor.fetchone()[0]


def test_a_key_is_stored_encrypted_and_never_shown_again(owner, owner_client):
    response = owner_client.put("/api/provider-keys/anthropic/", {"api_key": OWNER_KEY}, format="json")
    assert response.status_code == 200, response.content
    assert OWNER_KEY not in response.content.decode() and response.json()["key_suffix"] == OWNER_KEY[-4:]
    row = OwnerProviderKey.objects.get(owner=owner, provider="anthropic")
    stored = raw_column(row.pk)
    assert OWNER_KEY not in stored and stored.startswith("gAAAA")  # a Fernet token
    assert crypto.decrypt(stored) == OWNER_KEY
    listing = owner_client.get("/api/provider-keys/")
    assert listing.status_code == 200 and OWNER_KEY not in listing.content.decode()
    assert [k["provider"] for k in listing.json()] == ["anthropic"]


def test_rotation_re_encrypts_under_the_new_key(owner, settings):
    from cryptography.fernet import Fernet
    from django.core.management import call_command

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.PROVIDER_KEYS_ENCRYPTION_KEYS = [old]
    row = owner_provider_key_set(owner=owner, provider="anthropic", api_key=OWNER_KEY)
    settings.PROVIDER_KEYS_ENCRYPTION_KEYS = [new, old]
    call_command("rotate_provider_keys")
    settings.PROVIDER_KEYS_ENCRYPTION_KEYS = [new]  # the old key is dropped after the rotation
    assert crypto.decrypt(raw_column(row.pk)) == OWNER_KEY


def test_the_owners_key_is_used_for_their_agents_before_the_environments(owner, make_user, monkeypatch, settings):
    settings.AGENT_EXECUTION_MODE = "inline"
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", SERVER_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        owner_provider_key_set(owner=owner, provider="anthropic", api_key=OWNER_KEY)
        workflow, generation, ids = assistant_with(owner, provider="anthropic", model="claude-sonnet-4-5")
        fake.push(Turn([Text("Hello from your key.")]))
        firing = Firing.objects.get(
            pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hi")
        )
        assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
        chat_calls = [r for r in fake.requests if r.path == "/v1/messages"]
        assert [fake.presented_key(r) for r in chat_calls] == [OWNER_KEY]
        # Another owner without a key of their own gets the environment's.
        other = make_user("other-owner")
        workflow2, generation2, ids2 = assistant_with(other, provider="anthropic", model="claude-sonnet-4-5")
        fake.push(Turn([Text("Hello from the server key.")]))
        firing_start(workflow=workflow2, generation=generation2, agent_node_id=ids2["lead"], prompt="hi")
        chat_calls = [r for r in fake.requests if r.path == "/v1/messages"]
        assert fake.presented_key(chat_calls[-1]) == SERVER_KEY


def test_the_test_button_makes_one_cheap_call_with_the_stored_key(owner, client, monkeypatch):
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        fake.valid_keys = {OWNER_KEY}
        client.force_login(owner)
        page = client.post(
            "/settings/provider-keys/", {"provider": "anthropic", "action": "save", "api_key": OWNER_KEY}, follow=True
        )
        assert page.status_code == 200 and OWNER_KEY not in page.content.decode()
        assert page["Cache-Control"].startswith("max-age=0") or "no-store" in page["Cache-Control"]
        tested = client.post("/settings/provider-keys/", {"provider": "anthropic", "action": "test"}, follow=True)
        assert "The key works." in tested.content.decode()
        assert [(r.method, r.path) for r in fake.requests] == [("GET", "/v1/models")]
        owner_provider_key_set(owner=owner, provider="anthropic", api_key="sk-ant-wrong-key-1234")
        row = owner_provider_key_test(owner=owner, provider="anthropic")
        assert row.last_test_ok is False and "invalid x-api-key" in row.last_test_message


# --- server-side request forgery ---------------------------------------------------------------------------------


@pytest.fixture
def dns(monkeypatch):
    """Names this test resolves: internal.example -> a private address, public.example -> a public one."""
    answers = {"internal.example": "10.20.30.40", "public.example": "93.184.215.14", "rebinds.example": "93.184.215.15"}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8000/v1", "loopback"),
        ("https://127.0.0.1:8000/v1", "loopback"),
        ("http://169.254.169.254/", "metadata"),
        ("https://169.254.169.254/latest/meta-data/", "metadata"),
        ("https://[::1]/v1", "loopback"),
        ("http://[::1]/", "loopback"),
        ("https://[::ffff:10.0.0.1]/v1", "private"),
        ("https://[fe80::1]/v1", "link-local"),
        ("https://internal.example/v1", "private"),
        ("https://100.64.1.1/v1", "shared"),
        ("https://0.0.0.0/v1", "reserved"),
        ("http://public.example/v1", "https"),
        ("ftp://public.example/v1", "https"),
        ("https://user:pw@public.example/v1", "user name"),
    ],
)
def test_owner_base_urls_to_internal_addresses_are_refused_with_the_reason(owner, dns, url, reason):
    with pytest.raises(Exception) as caught:
        owner_provider_key_set(owner=owner, provider="openai_compatible", api_key="sk-x", base_url=url)
    assert getattr(caught.value, "code", "") == "unsafe_base_url"
    assert reason in caught.value.message
    assert not OwnerProviderKey.objects.exists()


def test_a_public_https_url_and_an_allowlisted_internal_host_are_accepted(owner, dns, settings):
    row = owner_provider_key_set(
        owner=owner, provider="openai_compatible", api_key="sk-x", base_url="https://public.example/v1"
    )
    assert row.base_url == "https://public.example/v1"
    AllowedProviderHost.objects.create(host="internal.example", note="our vLLM box")
    row = owner_provider_key_set(
        owner=owner, provider="openai_compatible", api_key="sk-x", base_url="http://internal.example:8000/v1"
    )
    assert row.base_url == "http://internal.example:8000/v1"
    settings.PROVIDER_BASE_URL_ALLOW_HTTP = True
    assert check_outbound_url("http://public.example/v1", allow_http=True) == "http://public.example/v1"


def test_the_base_url_is_checked_again_when_used(owner, dns, monkeypatch):
    from providers import ChatRequest, ChatUnifier

    owner_provider_key_set(
        owner=owner, provider="openai_compatible", api_key="sk-x", base_url="https://rebinds.example/v1"
    )
    dns["rebinds.example"] = "192.168.1.10"  # the name now answers with a private address
    request = ChatRequest(
        provider="openai_compatible",
        model="qwen3",
        messages=[{"role": "user", "blocks": [{"type": "text", "text": "hi"}]}],
        **owner_request_overrides(owner_id=owner.pk, provider="openai_compatible"),
    )
    with pytest.raises(UnsafeURLError, match="private address"):
        ChatUnifier().chat(request)


def test_a_redirect_to_an_internal_address_is_not_followed(owner):
    with FakeChatCompletions() as fake:
        # The staff allowlist names the test server's host deliberately: the fake runs on 127.0.0.1.
        AllowedProviderHost.objects.create(host=f"127.0.0.1:{fake.port}", note="test fake")
        owner_provider_key_set(owner=owner, provider="openai_compatible", api_key="sk-x", base_url=fake.base_url)
        overrides = owner_request_overrides(owner_id=owner.pk, provider="openai_compatible")
        from providers import ChatRequest, ChatUnifier

        request = ChatRequest(
            provider="openai_compatible",
            model="qwen3",
            messages=[{"role": "user", "blocks": [{"type": "text", "text": "hi"}]}],
            **overrides,
        )
        fake.push(Turn([Text("through the allowlisted fake")]))
        assert ChatUnifier().chat(request).message["blocks"][0]["text"] == "through the allowlisted fake"
        fake.push(RawReply(307, b"", {"Location": "http://169.254.169.254/latest/meta-data/"}))
        with pytest.raises(UnsafeURLError, match="metadata"):
            ChatUnifier().chat(request)


@pytest.mark.parametrize("public_answers", [1, 2, 3, 4, 5])
def test_a_name_that_rebinds_between_check_and_connection_never_gets_the_key(
    owner, settings, monkeypatch, public_answers
):
    """DNS rebinding: the name answers a public address to the first lookups and 127.0.0.2 after. However many
    lookups the checks make before the connection's own, the owner's key never reaches the internal server: each
    connection goes only to an address vetted in its own lookup (core/outbound.py)."""
    import http.server
    import threading

    from providers import ChatRequest, ChatUnifier

    seen: list[str] = []

    class Internal(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args):
            pass

    internal = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Internal)
    threading.Thread(target=internal.serve_forever, daemon=True).start()
    lookups = []
    real = socket.getaddrinfo

    def rebinding_getaddrinfo(host, port, *args, **kwargs):
        if host == "rebinds.example":
            lookups.append(host)
            answer = "93.184.215.14" if len(lookups) <= public_answers else "127.0.0.2"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo)
    settings.PROVIDER_BASE_URL_ALLOW_HTTP = True
    try:
        owner_provider_key_set(
            owner=owner,
            provider="openai_compatible",
            api_key="sk-owner-secret-4242",
            base_url=f"http://rebinds.example:{internal.server_address[1]}/v1",
        )
        request = ChatRequest(
            provider="openai_compatible",
            model="qwen3",
            messages=[{"role": "user", "blocks": [{"type": "text", "text": "hi"}]}],
            **owner_request_overrides(owner_id=owner.pk, provider="openai_compatible"),
        )
        # Refused, or (when every lookup answered public) stopped by the tests' network guard at the public address.
        with pytest.raises(Exception) as caught:
            ChatUnifier().chat(request)
    finally:
        internal.shutdown()
        internal.server_close()
    assert seen == [], "the internal server received the owner's request"
    if len(lookups) > public_answers:  # the internal answer was given to one lookup: that lookup refused it
        assert isinstance(caught.value, UnsafeURLError) and "loopback" in caught.value.message
