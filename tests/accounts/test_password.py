"""Owners change their own password on /settings/password/ (issue 34): the current one is asked first, the other
sessions end, this one stays signed in; the page is linked from the header."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

NEW = "a-brand-new-passphrase-42"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_header_links_the_password_page(owner):
    page = signed_in(owner).get("/settings/token/").content.decode()
    assert 'href="/settings/password/"' in page
    shown = signed_in(owner).get("/settings/password/")
    assert shown.status_code == 200 and 'name="old_password"' in shown.content.decode()
    assert "no-store" in shown["Cache-Control"]
    assert Client().get("/settings/password/").status_code == 302  # anonymous: to the login page


def test_a_wrong_current_password_or_a_weak_new_one_changes_nothing(owner):
    client = signed_in(owner)
    wrong = client.post("/settings/password/", {"old_password": "nope", "new_password1": NEW, "new_password2": NEW})
    assert wrong.status_code == 200 and "incorrect" in wrong.content.decode()
    weak = client.post(
        "/settings/password/",
        {"old_password": "pw-for-tests-1", "new_password1": "short", "new_password2": "short"},
    )
    assert weak.status_code == 200 and "too short" in weak.content.decode()
    owner.refresh_from_db()
    assert owner.check_password("pw-for-tests-1")


def test_changing_it_ends_the_other_sessions_and_keeps_this_one(owner):
    client, other = signed_in(owner), signed_in(owner)
    assert other.get("/settings/token/").status_code == 200
    changed = client.post(
        "/settings/password/", {"old_password": "pw-for-tests-1", "new_password1": NEW, "new_password2": NEW}
    )
    assert changed.status_code == 302 and changed["Location"] == "/settings/password/"
    assert "other sessions were signed out" in client.get("/settings/password/").content.decode()
    owner.refresh_from_db()
    assert owner.check_password(NEW)
    assert client.get("/settings/token/").status_code == 200  # this browser stays signed in
    ended = other.get("/settings/token/")
    assert ended.status_code == 302 and ended["Location"].startswith("/login/")
    assert Client().login(username=owner.username, password=NEW)
