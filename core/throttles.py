"""Rate limits (DRF throttles counted in the Redis cache); rates live in settings.THROTTLE_RATES.

- `user`: every API request, per signed-in user (per IP for anonymous ones).
- `chat_send`: sending, editing and trying again in the chat, per user (views with `throttle_scope = "chat_send"`).
- `login` and `token`: login attempts (`ip_throttle` in the login view) and API token creation (`POST
  /api/tokens/`, `throttle_scope = "token"`), per client IP.
- The workflow socket counts its own messages (core/consumers.py, SOCKET_MESSAGE_LIMIT).

Rates are read from settings on every request, so an override (or a test) takes effect at once. Over the limit an
API call answers 429 `{"code": "rate_limited"}` with `Retry-After`; a page answers a plain 429 with `Retry-After`.
"""

from __future__ import annotations

import math

from django.conf import settings
from django.http import HttpResponse
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle, UserRateThrottle


class ApiUserThrottle(UserRateThrottle):
    scope = "user"

    def get_rate(self):
        return settings.THROTTLE_RATES.get(self.scope)


class ScopedSettingThrottle(ScopedRateThrottle):
    # Scopes counted per client IP even for a signed-in caller (creating credentials: one account must not be a
    # way around the per-address limit).
    IP_SCOPES = frozenset({"login", "token"})

    def allow_request(self, request, view):
        # Reading (listing one's tokens) is not creating; only unsafe methods count against an IP scope.
        if getattr(view, "throttle_scope", None) in self.IP_SCOPES and request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return super().allow_request(request, view)

    def get_rate(self):
        return settings.THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request, view):
        if self.scope in self.IP_SCOPES:
            return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
        return super().get_cache_key(request, view)


class IpThrottle(SimpleRateThrottle):
    def __init__(self, scope: str):
        self.scope = scope
        super().__init__()

    def get_rate(self):
        return settings.THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def ip_throttle(request, scope: str) -> HttpResponse | None:
    """None when `request` may go on; else the 429 to answer (for Django views, not DRF ones)."""
    throttle = IpThrottle(scope)
    if throttle.allow_request(request, None):
        return None
    response = HttpResponse(
        "Too many attempts from your address. Wait a little and try again.\n",
        status=429,
        content_type="text/plain; charset=utf-8",
    )
    response["Retry-After"] = str(max(1, math.ceil(throttle.wait() or 1)))
    return response
