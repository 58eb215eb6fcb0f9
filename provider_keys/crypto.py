"""Encryption of owners' provider keys at rest: Fernet under keys from settings, MultiFernet for rotation.

PROVIDER_KEYS_ENCRYPTION_KEYS is a list of Fernet keys (urlsafe base64 of 32 bytes); the first encrypts, all
decrypt. Rotation (docs/security.md): put a new key first, run `manage.py rotate_provider_keys`, then drop the old
key. Without the setting a key is derived from SECRET_KEY, so a development install works out of the box.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class KeyDecryptionError(Exception):
    """A stored key could not be decrypted with any configured encryption key (rotated away, or tampered)."""


def _fernet() -> MultiFernet:
    keys = list(getattr(settings, "PROVIDER_KEYS_ENCRYPTION_KEYS", None) or [])
    if not keys:
        digest = hashlib.sha256(f"provider-keys:{settings.SECRET_KEY}".encode()).digest()
        keys = [base64.urlsafe_b64encode(digest).decode()]
    return MultiFernet([Fernet(k.encode() if isinstance(k, str) else k) for k in keys])


def encrypt(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise KeyDecryptionError("the stored provider key cannot be decrypted with the configured keys") from None


def rotate(token: str) -> str:
    """The token re-encrypted under the first (newest) key."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        raise KeyDecryptionError("the stored provider key cannot be decrypted with the configured keys") from None
