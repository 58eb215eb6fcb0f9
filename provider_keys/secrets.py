"""Owners' named secrets (what an MCP server's headers carry): set, delete, list names, and the one read that
decrypts a value, for the connection that sends it. Write-only like provider keys: a value never leaves this module
but inside the headers of the request it was stored for."""

from __future__ import annotations

import re

from django.db import transaction

from core.errors import NotFoundError, ServiceError

from .crypto import KeyDecryptionError, decrypt, encrypt
from .models import OwnerSecret

SECRET_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
MAX_SECRET_LENGTH = 8000
MAX_SECRETS_PER_OWNER = 200


class SecretUnavailable(LookupError):
    """A secret a node names is not stored (or cannot be decrypted): the message says which, never its value."""


def secret_problem(name: str, value: str) -> tuple[str, str] | None:
    """(code, message) of what is wrong with a secret's name or (stripped) value, else None."""
    if not SECRET_NAME.fullmatch(name):
        return "invalid_secret_name", "A secret's name starts with a letter: letters, digits, _ . - (64 at most)."
    if not value:
        return "invalid_secret", "The secret is empty."
    if len(value) > MAX_SECRET_LENGTH or any(ord(c) < 32 for c in value):
        return "invalid_secret", "That secret is too long or holds control characters."
    return None


def owner_secret_set(*, owner, name: str, value: str) -> OwnerSecret:
    name, value = (name or "").strip(), (value or "").strip()
    if problem := secret_problem(name, value):
        raise ServiceError(*problem)
    with transaction.atomic():
        exists = OwnerSecret.objects.filter(owner=owner, name=name).exists()
        if not exists and OwnerSecret.objects.filter(owner=owner).count() >= MAX_SECRETS_PER_OWNER:
            raise ServiceError("too_many_secrets", f"You can store at most {MAX_SECRETS_PER_OWNER} secrets.")
        row, _ = OwnerSecret.objects.update_or_create(
            owner=owner,
            name=name,
            defaults={"encrypted_value": encrypt(value), "value_suffix": value[-4:] if len(value) >= 12 else ""},
        )
    return row


def owner_secret_delete(*, owner, name: str) -> None:
    deleted, _ = OwnerSecret.objects.filter(owner=owner, name=name).delete()
    if not deleted:
        raise NotFoundError(message="No secret is stored under that name.")


def owner_secrets_list(*, owner) -> list[OwnerSecret]:
    return list(
        OwnerSecret.objects.filter(owner=owner).only("name", "value_suffix", "updated_at", "owner_id").order_by("name")
    )


def owner_secret_values(*, owner_id, names: list[str]) -> dict[str, str]:
    """The decrypted values of `names`; SecretUnavailable names the first one missing or unreadable."""
    rows = {r.name: r for r in OwnerSecret.objects.filter(owner_id=owner_id, name__in=set(names))}
    values = {}
    for name in names:
        row = rows.get(name)
        if row is None:
            raise SecretUnavailable(f"The secret {name!r} is not stored; add it under Secrets.")
        try:
            values[name] = decrypt(row.encrypted_value)
        except KeyDecryptionError:
            raise SecretUnavailable(
                f"The secret {name!r} cannot be decrypted with this server's keys; store it again."
            ) from None
    return values
