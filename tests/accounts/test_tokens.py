"""API tokens: hashed at rest, named, expiring, several per owner, revocable one by one (page, API, admin)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.tokens import api_token_create, hash_key

pytestmark = pytest.mark.django_db


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_token_row_holds_no_raw_key(owner):
    issued = api_token_create(user=owner, name="laptop")
    with connection.cursor() as cursor:
        cursor.execute("select * from accounts_apitoken where id = %s", [issued.token.pk])
        row = cursor.fetchone()
    assert not any(isinstance(value, str) and issued.raw_key in value for value in row)
    assert issued.token.key_hash == hash_key(issued.raw_key) != issued.raw_key
    assert issued.raw_key.startswith(issued.token.prefix) and len(issued.token.prefix) < len(issued.raw_key) // 3
    assert token_client(issued.raw_key).get("/api/workflows/").status_code == 200


def test_expired_and_revoked_tokens_get_401(owner):
    expired = api_token_create(user=owner, name="old")
    ApiToken.objects.filter(pk=expired.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    revoked = api_token_create(user=owner, name="gone")
    kept = api_token_create(user=owner, name="kept")
    assert token_client(revoked.raw_key).get("/api/workflows/").status_code == 200

    response = token_client(kept.raw_key).delete(f"/api/tokens/{revoked.token.pk}/")
    assert response.status_code == 200 and response.json()["revoked_at"]

    for key in (expired.raw_key, revoked.raw_key, "oc_not-a-token"):
        response = token_client(key).get("/api/workflows/")
        assert response.status_code == 401, key
        assert response.json()["code"] == "authentication_failed"
    # Revoking one token leaves the owner's others working.
    assert token_client(kept.raw_key).get("/api/workflows/").status_code == 200


def test_tokens_through_the_api_show_the_key_once_and_no_store(owner, other_owner):
    client = APIClient()
    client.force_authenticate(owner)
    made = client.post("/api/tokens/", {"name": "ci", "expires_in_days": 7}, format="json")
    assert made.status_code == 201
    assert "no-store" in made["Cache-Control"]
    key = made.json()["key"]
    assert made.json()["prefix"] == key[: len(made.json()["prefix"])]
    listed = client.get("/api/tokens/").json()
    assert [t["name"] for t in listed] == ["ci"] and "key" not in listed[0]
    expires = ApiToken.objects.get(pk=made.json()["id"]).expires_at
    assert timedelta(days=6, hours=23) < expires - timezone.now() <= timedelta(days=7)

    intruder = APIClient()
    intruder.force_authenticate(other_owner)
    assert intruder.delete(f"/api/tokens/{made.json()['id']}/").status_code == 404
    assert token_client(key).get("/api/tokens/").status_code == 200
    assert client.post("/api/tokens/", {"name": "a\u0000b"}, format="json").status_code == 400


def test_a_token_cannot_create_tokens_so_revoking_it_locks_its_holder_out(owner):
    stolen = api_token_create(user=owner, name="stolen")
    holder = token_client(stolen.raw_key)
    refused = holder.post("/api/tokens/", {"name": "spare", "expires_in_days": 365}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "session_required"
    assert "key" not in refused.json()
    assert list(ApiToken.objects.filter(user=owner).values_list("name", flat=True)) == ["stolen"]
    assert holder.get("/api/tokens/").status_code == 200  # the token still reads what its owner may read
    session = APIClient()
    session.force_login(owner)
    assert session.delete(f"/api/tokens/{stolen.token.pk}/").status_code == 200
    assert holder.get("/api/workflows/").status_code == 401  # nothing was left behind for the holder
    assert session.post("/api/tokens/", {"name": "mine"}, format="json").status_code == 201


def test_last_used_is_recorded(owner, settings):
    settings.API_TOKEN_LAST_USED_RESOLUTION_S = 0
    issued = api_token_create(user=owner, name="probe")
    assert issued.token.last_used_at is None
    token_client(issued.raw_key).get("/api/workflows/")
    assert ApiToken.objects.get(pk=issued.token.pk).last_used_at is not None


def test_token_page_post_redirect_get_shows_the_key_once(client, owner):
    client.force_login(owner)
    page = client.get("/settings/token/")
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]

    posted = client.post("/settings/token/", {"action": "create", "name": "script", "expires_in_days": "30"})
    assert posted.status_code == 302 and posted["Location"] == "/settings/token/"
    token = ApiToken.objects.get(user=owner, name="script")
    shown = client.get("/settings/token/")
    assert "no-store" in shown["Cache-Control"]
    html = shown.content.decode()
    assert 'id="new-token"' in html and "data-copy-target" in html
    raw = html.split('id="new-token">')[1].split("<")[0]
    assert hash_key(raw) == token.key_hash
    # The session held the key only until that GET: a reload shows the list, not the key.
    again = client.get("/settings/token/").content.decode()
    assert raw not in again and token.prefix in again

    replaced = client.post("/settings/token/", {"action": "replace", "token_id": token.pk})
    assert replaced.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    fresh = ApiToken.objects.get(user=owner, name="script", revoked_at__isnull=True)
    assert fresh.pk != token.pk
    client.post("/settings/token/", {"action": "revoke", "token_id": fresh.pk})
    fresh.refresh_from_db()
    assert fresh.revoked_at is not None


def test_admin_lists_names_and_prefixes_never_keys(client, make_user, owner):
    staff = make_user("boss", is_staff=True, is_superuser=True)
    issued = api_token_create(user=owner, name="visible-name")
    client.force_login(staff)
    listing = client.get("/admin/accounts/apitoken/").content.decode()
    assert "visible-name" in listing and issued.token.prefix in listing
    detail = client.get(f"/admin/accounts/apitoken/{issued.token.pk}/change/").content.decode()
    assert issued.raw_key not in listing + detail
    assert issued.token.key_hash not in listing + detail
    assert client.get("/admin/accounts/apitoken/add/").status_code == 403


def test_create_api_token_command_prints_a_working_key_and_rotates(owner, capsys):
    call_command("create_api_token", owner.username)
    first = capsys.readouterr().out.strip().splitlines()[-1]
    call_command("create_api_token", owner.username)
    second = capsys.readouterr().out.strip().splitlines()[-1]
    assert token_client(second).get("/api/workflows/").status_code == 200
    assert token_client(first).get("/api/workflows/").status_code == 401


def test_legacy_plaintext_tokens_migrate_to_hashes(owner):
    """A database made before this change has DRF's `authtoken_token`; its keys keep working, hashed."""
    from django.db.migrations.executor import MigrationExecutor

    legacy_key = "0123456789abcdef0123456789abcdef01234567"
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0001_initial")])
    with connection.cursor() as cursor:
        cursor.execute(
            "create table authtoken_token (key varchar(40) primary key, created timestamptz not null,"
            " user_id integer not null)"
        )
        cursor.execute("insert into authtoken_token values (%s, now(), %s)", [legacy_key, owner.pk])
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0002_hash_legacy_authtoken_keys")])
    assert "authtoken_token" not in connection.introspection.table_names()
    migrated = ApiToken.objects.get(user=owner)
    assert migrated.key_hash == hash_key(legacy_key) and legacy_key not in (migrated.prefix * 2)
    assert migrated.expires_at > timezone.now()
    assert token_client(legacy_key).get("/api/workflows/").status_code == 200
