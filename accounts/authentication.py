"""`Authorization: Token <key>` against hashed, expiring, revocable tokens."""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication


class HashedTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key):
        # Imported here: DRF imports this class while `core.errors` (which the services use) imports DRF.
        from .tokens import api_token_authenticate

        token = api_token_authenticate(key)
        if token is None:
            # One message for unknown, revoked and expired keys: the answer tells a guesser nothing.
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        return (token.user, token)
