"""Rate limits (DRF throttles counted in the Redis cache); rates live in settings.THROTTLE_RATES.

- `user`: every API request, per signed-in user (per IP for anonymous ones).
- `chat_send`: sending, editing and trying again in the chat, per user (views with `throttle_scope = "chat_send"`).
- `login` and `login_account`: failed login attempts per client IP and per account tried (`LoginFailures` in the
  login view); a successful login does not count.
- `token`: API token creation (`POST /api/tokens/`, `throttle_scope = "token"`), per client IP.
- The client IP is `core.client_address.client_address` everywhere (X-Forwarded-For only as far as
  `TRUSTED_PROXY_COUNT` vouches for it).
- The workflow socket counts its own messages (core/consumers.py, SOCKET_MESSAGE_LIMIT).

Rates are read from settings on every request, so an override (or a test) takes effect at once. Over the limit an
API call answers 429 `{"code": "rate_limited"}` with `Retry-After`; a page answers a plain 429 with `Retry-After`.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle, UserRateThrottle

from core.client_address import client_address


class ClientAddressMixin:
    # DRF's get_ident believes a raw X-Forwarded-For unless NUM_PROXIES is set; ours follows one setting.
    def get_ident(self, request):
        return client_address(request.META)


class ApiUserThrottle(ClientAddressMixin, UserRateThrottle):
    scope = "user"

    def get_rate(self):
        return settings.THROTTLE_RATES.get(self.scope)


class ScopedSettingThrottle(ClientAddressMixin, ScopedRateThrottle):
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


class IpThrottle(ClientAddressMixin, SimpleRateThrottle):
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


def _count(key: str, *, timeout: int) -> int:
    """Add one to a counter atomically, starting it when it does not exist (or just expired)."""
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # it expired between the two calls
        cache.add(key, 0, timeout=timeout)
        return cache.incr(key)


class LoginFailures:
    """Failed logins counted per client IP (`login`) and per account tried (`login_account`), so a password can be
    guessed neither from one address nor from many.

    An attempt is counted before the password is checked (atomically, so parallel guesses cannot all slip under the
    limit) and taken back once it succeeds: only failures count. Fixed windows of the rate's period.
    """

    def __init__(self, request, username: str):
        self.request = request
        account = hashlib.sha256(username.strip().casefold().encode()).hexdigest()[:32]
        self.counters = [("login", client_address(request.META)), ("login_account", account)]
        self.retry_after = 1
        self._counted: list[str] = []

    def begin(self) -> bool:
        """Count this attempt; False when a limit is already reached (nothing else is counted then)."""
        now = time.time()
        for scope, ident in self.counters:
            limit, period = SimpleRateThrottle.parse_rate(None, settings.THROTTLE_RATES[scope])
            window = int(now // period)
            key = f"throttle_{scope}_{ident}_{window}"
            if _count(key, timeout=period + 1) > limit:
                cache.decr(key)
                self.retry_after = max(1, math.ceil((window + 1) * period - now))
                self.succeeded()
                return False
            self._counted.append(key)
        return True

    def succeeded(self) -> None:
        for key in self._counted:
            try:
                cache.decr(key)
            except ValueError:  # the window ended meanwhile; nothing left to take back
                pass
        self._counted = []

    def refusal(self) -> HttpResponse:
        response = HttpResponse(
            "Too many failed sign-ins. Wait a little and try again.\n",
            status=429,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(self.retry_after)
        return response
