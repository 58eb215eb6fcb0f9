"""API tokens: made (the raw key returned once), looked up by hash, revoked one by one."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import NotFoundError, ServiceError
from core.text import require_storable_text, require_visible_name

from .locks import api_token_for_update
from .models import ApiToken

KEY_PREFIX = "oc_"
SHOWN_PREFIX_CHARS = 10


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    raw_key: str  # shown to the owner once, never stored


def api_token_create(*, user, name: str, expires_in_days: int | None = None) -> IssuedToken:
    name = require_storable_text(name.strip(), field="name")
    if not name:
        raise ServiceError("invalid_request", "A token needs a name.")
    require_visible_name(name)
    if len(name) > 100:
        raise ServiceError("invalid_request", "A token name has at most 100 characters.")
    days = settings.API_TOKEN_DEFAULT_DAYS if expires_in_days is None else expires_in_days
    if not 1 <= days <= settings.API_TOKEN_MAX_DAYS:
        raise ServiceError("invalid_request", f"A token expires in 1 to {settings.API_TOKEN_MAX_DAYS} days.")
    active = ApiToken.objects.filter(user=user, revoked_at__isnull=True, expires_at__gt=timezone.now()).count()
    if active >= settings.API_TOKENS_PER_OWNER_MAX:
        raise ServiceError(
            "too_many_tokens", f"You have {active} active tokens; revoke one before making another.", status=409
        )
    raw_key = KEY_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=raw_key[:SHOWN_PREFIX_CHARS],
        key_hash=hash_key(raw_key),
        expires_at=timezone.now() + timedelta(days=days),
    )
    return IssuedToken(token=token, raw_key=raw_key)


def api_token_revoke(*, user, token_id: int) -> ApiToken:
    """Revoke one of the owner's tokens (revoking a revoked one changes nothing); another owner's id is a 404."""
    with transaction.atomic():
        token = api_token_for_update(user=user, token_id=token_id)
        if token is None:
            raise NotFoundError("not_found", "No such token.")
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
    return token


def api_token_replace(*, user, token_id: int) -> IssuedToken:
    """A new key under the same name and lifetime; the old one stops working at once."""
    with transaction.atomic():
        old = api_token_revoke(user=user, token_id=token_id)
        days = round((old.expires_at - old.created_at).total_seconds() / 86400)
        lifetime = max(1, min(settings.API_TOKEN_MAX_DAYS, days))
        return api_token_create(user=user, name=old.name, expires_in_days=lifetime)


def api_token_authenticate(raw_key: str) -> ApiToken | None:
    """The live token for a raw key, or None (unknown, revoked, expired, or its owner is inactive).

    `last_used_at` is written at most once per API_TOKEN_LAST_USED_RESOLUTION_S, so a busy client does not turn
    every request into a row update.
    """
    if not raw_key or len(raw_key) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(raw_key)).first()
    now = timezone.now()
    if token is None or token.revoked_at is not None or token.expires_at <= now or not token.user.is_active:
        return None
    resolution = timedelta(seconds=settings.API_TOKEN_LAST_USED_RESOLUTION_S)
    if token.last_used_at is None or now - token.last_used_at >= resolution:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def api_tokens_for_owner(*, user) -> list[ApiToken]:
    return list(ApiToken.objects.filter(user=user).order_by("-created_at", "-id"))
