"""Bad input gets a clear refusal with a code, never a crash."""

import json
import os
import subprocess
import sys

import pytest

from tests.processes import REPO_ROOT

pytestmark = pytest.mark.django_db


def test_an_oversized_body_answers_413_with_a_code(owner_client, settings):
    settings.REQUEST_MAX_BYTES = 4096
    response = owner_client.post(
        "/api/workflows/", data=json.dumps({"name": "x" * 10_000}), content_type="application/json"
    )
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"


def test_a_deeply_nested_json_body_is_refused(owner_client):
    deep = "[" * 500 + "]" * 500
    response = owner_client.post("/api/workflows/", data=deep, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"


def test_malformed_json_is_refused_with_a_code(owner_client):
    response = owner_client.post("/api/workflows/", data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"


def test_production_settings_pass_the_deploy_check(settings):
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "Zq8v-3kLr9_pW2xN7mB4tY6uH1cJ5eA0dF8gS3qR7wE2yT9uI4oP6aZ",
        "ALLOWED_HOSTS": "opencompany.example",
        "CSRF_TRUSTED_ORIGINS": "https://opencompany.example",
        "SECURE_HSTS_PRELOAD": "1",
        "DATABASE_URL": settings.DATABASE_URL,
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "opencompany.settings.base",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key(settings):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(
        {
            "DEBUG": "0",
            "DATABASE_URL": "postgres://nobody@127.0.0.1:1/x",
            "REDIS_URL": settings.REDIS_URL,
            "DJANGO_SETTINGS_MODULE": "opencompany.settings.base",
        }
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and "SECRET_KEY" in result.stderr
