"""Issue 34 (High): per-address limits count the connection's peer, not a client-written X-Forwarded-For; failed
logins count per account as well as per address; successful logins do not count."""

from __future__ import annotations

import pytest
import requests
from django.core.cache import cache
from django.test import Client, RequestFactory

from accounts.tokens import api_token_create
from core.client_address import client_address
from tests.processes import start_web_server

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-for-tests-1"


@pytest.fixture
def rates(settings):
    cache.clear()
    settings.THROTTLE_RATES = {**settings.THROTTLE_RATES}
    yield settings.THROTTLE_RATES
    cache.clear()


@pytest.fixture
def web(tmp_path, rates):
    process, base_url = start_web_server(
        tmp_path,
        THROTTLE_RATE_LOGIN="3/minute",
        THROTTLE_RATE_LOGIN_ACCOUNT="1000/minute",
        THROTTLE_RATE_TOKEN="2/hour",
    )
    try:
        yield base_url
    finally:
        process.stop()


def _login(session: requests.Session, base_url: str, username: str, password: str, forwarded: str) -> int:
    session.get(f"{base_url}/login/", timeout=10)
    form = {"username": username, "password": password, "csrfmiddlewaretoken": session.cookies["csrftoken"]}
    response = session.post(
        f"{base_url}/login/", data=form, headers={"X-Forwarded-For": forwarded}, allow_redirects=False, timeout=10
    )
    return response.status_code


def test_a_forged_forwarded_for_does_not_escape_the_login_limit_through_daphne(web, make_user):
    users = [make_user(f"xff-login-{i}") for i in range(5)]
    session = requests.Session()
    statuses = [_login(session, web, users[i].username, "wrong password!", f"203.0.113.{i + 1}") for i in range(4)]
    assert statuses == [200, 200, 200, 429]
    # The right password from the blocked address is refused too: the limit is not a hint to try elsewhere.
    assert _login(session, web, users[4].username, PASSWORD, "198.51.100.7") == 429


def test_a_forged_forwarded_for_does_not_escape_the_token_limit_through_daphne(web, make_user):
    owner = make_user("xff-token-owner")
    key = api_token_create(user=owner, name="driver").raw_key
    statuses = [
        requests.post(
            f"{web}/api/tokens/",
            json={"name": f"t{i}"},
            headers={"Authorization": f"Token {key}", "X-Forwarded-For": f"203.0.113.{i + 1}"},
            timeout=10,
        ).status_code
        for i in range(3)
    ]
    assert statuses == [201, 201, 429]


def _post_login(client: Client, username: str, password: str, address: str, **headers) -> int:
    return client.post(
        "/login/", {"username": username, "password": password}, REMOTE_ADDR=address, **headers
    ).status_code


def test_failed_logins_are_limited_per_account_from_any_address(rates, make_user):
    rates["login"], rates["login_account"] = "100/minute", "3/minute"
    victim, bystander = make_user("victim-account"), make_user("bystander-account")
    client = Client()
    assert [_post_login(client, victim.username, "guess!", f"10.9.0.{i}") for i in range(1, 4)] == [200] * 3
    # A fourth address with the right password: the account is resting, nothing is checked.
    assert _post_login(client, "Victim-Account", PASSWORD, "10.9.0.4") == 429
    assert _post_login(Client(), bystander.username, PASSWORD, "10.9.0.5") == 302  # other accounts are untouched


def test_successful_logins_do_not_count(rates, make_user):
    rates["login"] = rates["login_account"] = "2/minute"
    user = make_user("often-signs-in")
    assert [_post_login(Client(), user.username, PASSWORD, "10.8.0.1") for _ in range(4)] == [302] * 4
    client = Client()
    statuses = [_post_login(client, user.username, "wrong", "10.8.0.1") for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_forwarded_for_counts_only_the_entries_the_declared_proxies_wrote(settings, rates, make_user):
    meta = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "6.6.6.6, 192.0.2.10, 10.0.0.2"}
    settings.TRUSTED_PROXY_COUNT = 0
    assert client_address(meta) == "127.0.0.1"
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_address(meta) == "10.0.0.2"
    settings.TRUSTED_PROXY_COUNT = 2
    assert client_address(meta) == "192.0.2.10"
    assert client_address({**meta, "HTTP_X_FORWARDED_FOR": "not-an-address"}) == "127.0.0.1"
    assert RequestFactory().get("/", HTTP_X_FORWARDED_FOR="192.0.2.1").META["REMOTE_ADDR"] == "127.0.0.1"

    # Behind one proxy: what the client wrote to the left of the proxy's own entry changes nothing.
    settings.TRUSTED_PROXY_COUNT = 1
    rates["login"] = "2/minute"
    make_user("behind-proxy")
    client = Client()
    forged = [
        _post_login(client, "behind-proxy", "wrong", "10.0.0.1", HTTP_X_FORWARDED_FOR=f"6.6.6.{i}, 192.0.2.50")
        for i in range(3)
    ]
    assert forged == [200, 200, 429]
    other_client = _post_login(client, "behind-proxy", "wrong", "10.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.51")
    assert other_client == 200
