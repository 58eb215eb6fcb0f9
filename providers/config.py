"""Provider settings, read at call time.

Order: the value passed on the request, then the process environment, then Django settings (when configured),
then the default here. The environment is read live so a test or a deployment can point an SDK at another server
without re-importing settings; this package works without Django configured at all.
"""

from __future__ import annotations

import os
from typing import Any

DEFAULTS: dict[str, Any] = {
    "PROVIDER_CONNECT_TIMEOUT_S": 10.0,
    "PROVIDER_READ_TIMEOUT_S": 300.0,
    "PROVIDER_DEFAULT_MAX_OUTPUT_TOKENS": 8192,
    "OFFLINE_PROVIDER_DELAY_MS": 0,
    # Gemini's inline data limit per request: attached files above it go through its Files API.
    "GEMINI_INLINE_LIMIT_BYTES": 100 * 1024 * 1024,
}

KEY_SETTINGS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "openai_compatible": "OPENAI_COMPATIBLE_API_KEY",
    # The runtimes use the key (and base URL) of the API their CLI calls.
    "claude_code": "ANTHROPIC_API_KEY",
    "codex_cli": "OPENAI_API_KEY",
    "vertex_agent": "VERTEX_AGENT_CREDENTIALS",  # a service account JSON or an access token
}

BASE_URL_SETTINGS = {
    "openai": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "gemini": "GEMINI_BASE_URL",
    "openai_compatible": "OPENAI_COMPATIBLE_BASE_URL",
    "claude_code": "ANTHROPIC_BASE_URL",
    "codex_cli": "OPENAI_BASE_URL",
    "vertex_agent": "VERTEX_AGENT_BASE_URL",
}


def _django_setting(name: str) -> Any:
    try:
        from django.conf import settings

        if not settings.configured:
            return None
        return getattr(settings, name, None)
    except Exception:  # Django missing or settings broken: this package must still work on its own.
        return None


def setting(name: str, default: Any = None) -> Any:
    raw = os.environ.get(name)
    if raw not in (None, ""):
        base = DEFAULTS.get(name, default)
        if isinstance(base, bool):
            return raw.strip().lower() in {"1", "true", "yes", "on"}
        if isinstance(base, int):
            return int(raw)
        if isinstance(base, float):
            return float(raw)
        return raw
    value = _django_setting(name)
    if value not in (None, ""):
        return value
    return DEFAULTS.get(name, default)


def api_key_for(provider: str, override: str | None = None) -> str | None:
    if override:
        return override
    name = KEY_SETTINGS.get(provider)
    return setting(name) if name else None


def base_url_for(provider: str, override: str | None = None) -> str | None:
    if override:
        return override
    name = BASE_URL_SETTINGS.get(provider)
    return setting(name) if name else None


def timeouts() -> tuple[float, float]:
    return float(setting("PROVIDER_CONNECT_TIMEOUT_S")), float(setting("PROVIDER_READ_TIMEOUT_S"))
