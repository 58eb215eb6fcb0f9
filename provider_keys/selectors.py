"""Reads of owners' provider keys. The decrypted key leaves this module only inside a ChatRequest's overrides."""

from __future__ import annotations

from django.conf import settings

from providers import config as provider_config
from providers.errors import AuthError
from providers.types import UrlPolicy

from .crypto import KeyDecryptionError, decrypt
from .models import OWNER_KEY_PROVIDERS, AllowedProviderHost, OwnerProviderKey

_KEYED_PROVIDERS = frozenset(name for name, _ in OWNER_KEY_PROVIDERS)


def url_policy() -> UrlPolicy:
    """What owners' base URLs may reach: staff-listed hosts (admin, plus the PROVIDER_BASE_URL_ALLOWED_HOSTS setting)
    and whether plain http is allowed (PROVIDER_BASE_URL_ALLOW_HTTP)."""
    hosts = set(getattr(settings, "PROVIDER_BASE_URL_ALLOWED_HOSTS", None) or [])
    hosts.update(AllowedProviderHost.objects.values_list("host", flat=True))
    return UrlPolicy(
        allowed_hosts=tuple(sorted(h.lower() for h in hosts)),
        allow_http=bool(getattr(settings, "PROVIDER_BASE_URL_ALLOW_HTTP", False)),
    )


def server_key_configured(*, provider: str) -> bool:
    """Whether the server has its own setting for `provider` (an API key; for an OpenAI-compatible server, a base
    URL): what an owner without a stored key falls back to."""
    if provider == "openai_compatible":
        return bool(provider_config.base_url_for(provider))
    return bool(provider_config.api_key_for(provider))


def owner_provider_keys_list(*, owner) -> list[OwnerProviderKey]:
    # .only(): the encrypted column is not even loaded for a listing.
    return list(
        OwnerProviderKey.objects.filter(owner=owner)
        .only(
            "provider",
            "key_suffix",
            "base_url",
            "last_tested_at",
            "last_test_ok",
            "last_test_message",
            "created_at",
            "updated_at",
        )
        .order_by("provider")
    )


def owner_request_overrides(*, owner_id: int | None, provider: str) -> dict:
    """ChatRequest overrides (api_key, base_url, url_policy) from the owner's stored key for `provider`, or {} when
    they stored none (the environment's key is used then). Raises providers.errors.AuthError when the stored key
    cannot be decrypted: spending the environment's key instead would bill the operator for the owner."""

    if owner_id is None or provider not in _KEYED_PROVIDERS:
        return {}  # a provider owners store no key for (the offline one): nothing to look up on every step
    row = OwnerProviderKey.objects.filter(owner_id=owner_id, provider=provider).first()
    if row is None:
        return {}
    try:
        api_key = decrypt(row.encrypted_key)
    except KeyDecryptionError:
        raise AuthError(
            f"your stored {provider} key cannot be decrypted (the server's encryption keys changed); store it again "
            "on the provider keys page",
            provider=provider,
        ) from None
    overrides: dict = {"api_key": api_key}
    if row.base_url:
        # The base URL is checked again when used (in the adapter), against today's policy and DNS answer.
        overrides.update(base_url=row.base_url, url_policy=url_policy())
    return overrides
