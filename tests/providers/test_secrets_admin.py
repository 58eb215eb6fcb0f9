"""The admin for owners' secrets: names, owners and dates, searchable by owner; a value is write-only, never on a
page (not masked, not its stored token)."""

from __future__ import annotations

import pytest
from django.test import Client

from provider_keys.models import OwnerSecret
from provider_keys.secrets import owner_secret_set, owner_secret_values

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/provider_keys/ownersecret/"
VALUE = "Bearer tok-admin-0123456789-Qz7w"
NEW_VALUE = "Bearer tok-rotated-9876543210-Kx4v"


@pytest.fixture
def staff_client(make_user):
    client = Client()
    client.force_login(make_user("staff", is_staff=True, is_superuser=True))
    return client


def _never_shown(page: str, row: OwnerSecret, *values: str) -> None:
    row.refresh_from_db()
    for value in values:
        assert value not in page and value[-4:] not in page and value[-8:] not in page
    assert row.encrypted_value not in page and row.encrypted_value[:40] not in page


def test_the_list_shows_names_owners_and_dates_and_searches_by_owner(staff_client, make_user):
    alice, bob = make_user("alice-owner"), make_user("bob-owner")
    row = owner_secret_set(owner=alice, name="search-token", value=VALUE)
    owner_secret_set(owner=bob, name="other-token", value="Bearer bobs-own-0123456789-Jm2p")
    page = staff_client.get(CHANGELIST)
    assert page.status_code == 200
    text = page.content.decode()
    assert "search-token" in text and "alice-owner" in text and "other-token" in text
    _never_shown(text, row, VALUE, "Bearer bobs-own-0123456789-Jm2p")
    found = staff_client.get(CHANGELIST, {"q": "alice-owner"}).content.decode()
    assert "search-token" in found and "other-token" not in found


def test_the_change_page_never_shows_the_value_and_a_new_one_is_stored_encrypted(staff_client, make_user):
    owner = make_user("carol-owner")
    row = owner_secret_set(owner=owner, name="api-key", value=VALUE)
    url = f"{CHANGELIST}{row.pk}/change/"
    page = staff_client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'type="password"' in text and "api-key" in text
    _never_shown(text, row, VALUE)

    kept = staff_client.post(url, {"value": ""})
    assert kept.status_code == 302
    assert owner_secret_values(owner_id=owner.pk, names=["api-key"]) == {"api-key": VALUE}

    rotated = staff_client.post(url, {"value": NEW_VALUE}, follow=True)
    assert rotated.status_code == 200
    assert owner_secret_values(owner_id=owner.pk, names=["api-key"]) == {"api-key": NEW_VALUE}
    row.refresh_from_db()
    assert NEW_VALUE not in row.encrypted_value
    _never_shown(rotated.content.decode() + staff_client.get(url).content.decode(), row, VALUE, NEW_VALUE)


def test_adding_a_secret_needs_a_value_and_stores_it_through_the_service(staff_client, make_user):
    owner = make_user("dave-owner")
    add = f"{CHANGELIST}add/"
    assert 'type="password"' in staff_client.get(add).content.decode()
    refused = staff_client.post(add, {"owner": owner.pk, "name": "svc-token", "value": ""})
    assert refused.status_code == 200 and "A new secret needs a value." in refused.content.decode()
    bad_name = staff_client.post(add, {"owner": owner.pk, "name": "9 bad", "value": VALUE})
    assert bad_name.status_code == 200 and "starts with a letter" in bad_name.content.decode()
    assert VALUE not in bad_name.content.decode()  # a refused form does not echo the value back
    added = staff_client.post(add, {"owner": owner.pk, "name": "svc-token", "value": VALUE})
    assert added.status_code == 302
    assert owner_secret_values(owner_id=owner.pk, names=["svc-token"]) == {"svc-token": VALUE}
