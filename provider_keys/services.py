"""Writes of owners' provider keys: set (encrypted, base URL checked), delete, test with one cheap call."""

from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone

from core.errors import NotFoundError, ServiceError
from providers import ChatRequest, check_credentials
from providers.errors import ProviderError, scrub
from providers.urlguard import UnsafeURLError, check_outbound_url

from .crypto import encrypt
from .models import OWNER_KEY_PROVIDERS, OwnerProviderKey
from .selectors import owner_request_overrides, url_policy

PROVIDER_NAMES = dict(OWNER_KEY_PROVIDERS)
MAX_KEY_LENGTH = 1000
MAX_SERVICE_ACCOUNT_LENGTH = 20_000  # a service account key (JSON with a PEM private key) is ~2.5 kB


def _checked_base_url(provider: str, base_url: str) -> str:
    base_url = (base_url or "").strip()
    if provider != "openai_compatible":
        if base_url:
            raise ServiceError("invalid_base_url", "Only an OpenAI-compatible server takes a base URL.")
        return ""
    if not base_url:
        raise ServiceError("invalid_base_url", "An OpenAI-compatible server needs its base URL (https://…/v1).")
    if len(base_url) > 500:
        raise ServiceError("invalid_base_url", "The base URL is longer than 500 characters.")
    policy = url_policy()
    try:
        return check_outbound_url(base_url, allowed_hosts=policy.allowed_hosts, allow_http=policy.allow_http)
    except UnsafeURLError as exc:
        raise ServiceError("unsafe_base_url", exc.message) from None


def _service_account_suffix(text: str) -> str:
    """Check a Vertex service account key (JSON) and return the last characters of its key id, shown as the hint."""
    if len(text) > MAX_SERVICE_ACCOUNT_LENGTH:
        raise ServiceError("invalid_api_key", "That service account key is too long.")
    try:
        info = json.loads(text)
    except ValueError:
        raise ServiceError("invalid_api_key", "That is not valid JSON.") from None
    needed = ("client_email", "private_key", "token_uri")
    if not isinstance(info, dict) or info.get("type") != "service_account" or not all(info.get(k) for k in needed):
        raise ServiceError(
            "invalid_api_key", "A Vertex key is a service account key (JSON with client_email, private_key, token_uri)."
        )
    return str(info.get("private_key_id") or "")[-4:]


def owner_provider_key_set(*, owner, provider: str, api_key: str, base_url: str = "") -> OwnerProviderKey:
    if provider not in PROVIDER_NAMES:
        raise ServiceError("unknown_provider", f"Unknown provider {provider!r}.")
    api_key = (api_key or "").strip()
    if not api_key and provider != "openai_compatible":
        raise ServiceError("invalid_api_key", "The key is empty.")
    suffix = api_key[-4:] if len(api_key) >= 12 else ""
    if provider == "vertex_agent" and api_key.startswith("{"):
        suffix = _service_account_suffix(api_key)
    elif len(api_key) > MAX_KEY_LENGTH or any(ord(c) < 32 for c in api_key):
        raise ServiceError("invalid_api_key", "That is not an API key (too long, or it holds control characters).")
    checked_url = _checked_base_url(provider, base_url)
    with transaction.atomic():
        row, _ = OwnerProviderKey.objects.update_or_create(
            owner=owner,
            provider=provider,
            defaults={
                "encrypted_key": encrypt(api_key),
                "key_suffix": suffix,
                "base_url": checked_url,
                "last_tested_at": None,
                "last_test_ok": None,
                "last_test_message": "",
            },
        )
    return row


def owner_provider_key_delete(*, owner, provider: str) -> None:
    deleted, _ = OwnerProviderKey.objects.filter(owner=owner, provider=provider).delete()
    if not deleted:
        raise NotFoundError(message="No key is stored for that provider.")


def owner_provider_key_test(*, owner, provider: str) -> OwnerProviderKey:
    """One cheap call with the stored key (the provider's model list), made outside any transaction; the outcome is
    recorded on the row and returned."""

    row = OwnerProviderKey.objects.filter(owner=owner, provider=provider).first()
    if row is None:
        raise NotFoundError(message="No key is stored for that provider.")
    api_key = None
    try:
        overrides = owner_request_overrides(owner_id=owner.pk, provider=provider)
        api_key = overrides.get("api_key")
        check_credentials(ChatRequest(provider=provider, model="", messages=[], **overrides))
        ok, message = True, "The key works."
    except ProviderError as exc:
        ok, message = False, scrub(f"{exc.code}: {exc.message}", [api_key])[:300]
    OwnerProviderKey.objects.filter(pk=row.pk).update(
        last_tested_at=timezone.now(), last_test_ok=ok, last_test_message=message
    )
    row.refresh_from_db()
    return row
