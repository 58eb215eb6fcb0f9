"""Smaller promises: who may read the schema and docs, when X-Forwarded-Proto is believed, password rules, and
the security headers on every page."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from tests.processes import REPO_ROOT

pytestmark = pytest.mark.django_db


def test_schema_and_docs_are_for_signed_in_owners_and_tokens(owner):
    from accounts.tokens import api_token_create

    anonymous = APIClient()
    for path in ("/api/schema/", "/api/docs/", "/api/docs/?script="):
        response = anonymous.get(path)
        assert response.status_code == 401, path
    signed_in = Client()
    signed_in.force_login(owner)
    assert signed_in.get("/api/docs/").status_code == 200
    assert signed_in.get("/api/docs/?script=").status_code == 200
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=owner, name='docs').raw_key}")
    schema = token.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/tokens/" in schema.content


def _settings_value(name: str, **env) -> str:
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='opencompany.settings.base'; django.setup(); "
        f"from django.conf import settings; print(repr(getattr(settings, {name!r}, None)))"
    )
    environment = {k: v for k, v in os.environ.items() if k != "SECURE_PROXY_SETS_FORWARDED_PROTO"}
    environment.update(OPENCOMPANY_QUIET_EMBEDDED="1", **env)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_x_forwarded_proto_is_believed_only_when_a_setting_says_a_proxy_sets_it(settings):
    production = {"DEBUG": "0", "SECRET_KEY": "x" * 40, "ALLOWED_HOSTS": "example.com"}
    assert _settings_value("SECURE_PROXY_SSL_HEADER", **production) == "None"
    assert _settings_value("SECURE_PROXY_SSL_HEADER", **production, SECURE_PROXY_SETS_FORWARDED_PROTO="1") == (
        "('HTTP_X_FORWARDED_PROTO', 'https')"
    )
    # And a request that claims https through the header is not believed under the default.
    request = RequestFactory().get("/", HTTP_X_FORWARDED_PROTO="https")
    assert settings.SECURE_PROXY_SSL_HEADER is None
    assert request.is_secure() is False


def test_passwords_need_twelve_characters_and_must_not_resemble_the_user(make_user):
    user = make_user("margaret.hamilton", email="margaret@example.com")
    with pytest.raises(ValidationError) as short:
        validate_password("Xk7#pQ2!vL9", user=user)
    assert any(error.code == "password_too_short" for error in short.value.error_list)
    with pytest.raises(ValidationError) as similar:
        validate_password("margaret.hamilton1", user=user)
    assert any(error.code == "password_too_similar" for error in similar.value.error_list)
    with pytest.raises(ValidationError):
        validate_password("123456789012345", user=user)
    validate_password("violet-otter-harbour-42", user=user)


def test_every_page_answers_with_the_csp_and_no_framing(owner):
    client = Client()
    client.force_login(owner)
    for path in ("/", "/settings/token/", "/settings/usage/", "/settings/password/", "/login/", "/admin/login/"):
        response = client.get(path)
        policy = response["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy, path
        assert "script-src 'self'" in policy and "object-src 'none'" in policy, path
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
    api = APIClient()
    api.force_authenticate(owner)
    assert "frame-ancestors 'none'" in api.get("/api/workflows/")["Content-Security-Policy"]
