"""The one place a provider SDK client is built, and the one map from the SDKs' exceptions to our typed errors.

Every client is cached per (key, base URL, timeouts, URL policy): building one loads the CA bundle or creates SSL
contexts (0.1-0.2 s), and a shared client reuses its connections. Every client makes one attempt (SDK retries
off): a retried LLM step could be billed twice. The HTTP transport comes from `_http_client` alone, so a guard
on outbound connections is added in one place for every provider.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any, NamedTuple

import anthropic
import httpx2
import openai
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from .. import config
from ..errors import (
    AuthError,
    InvalidRequestError,
    NetworkError,
    ProviderError,
    RateLimitedError,
    ServerError,
    classify_status,
    parse_retry_after,
    scrub,
)
from ..types import ChatRequest, UrlPolicy
from ..urlguard import check_outbound_url, guarded_client

try:  # the google SDK may also use plain httpx underneath
    import httpx as _httpx

    TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx2.HTTPError, _httpx.HTTPError, OSError)
except ImportError:  # pragma: no cover
    TRANSPORT_ERRORS = (httpx2.HTTPError, OSError)

# Words in a provider's error text that say the request did not fit the context window.
CONTEXT_MARKERS = {
    "openai": ("context_length_exceeded", "context window", "maximum context length", "too many tokens"),
    "openai_compatible": ("context_length_exceeded", "context window", "maximum context length", "too many tokens"),
    "anthropic": ("prompt is too long", "context window", "too many tokens"),
    "gemini": ("exceeds the maximum number of tokens", "input token count", "context window", "too long"),
}
# An `error` event inside a 200 Anthropic stream: its status lives in the error type.
ANTHROPIC_STREAM_ERROR_STATUS = {
    "rate_limit_error": 429,
    "overloaded_error": 529,
    "api_error": 500,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "request_too_large": 413,
}
MISSING_KEY = "missing-api-key"  # the SDKs refuse to build without a key; the provider then answers 401


class Connection(NamedTuple):
    client: Any
    api_key: str | None  # the key as configured (None when none is), for scrubbing error texts


def connect(request: ChatRequest, provider: str) -> Connection:
    """The cached SDK client for `provider` with the request's key, base URL and URL policy."""
    api_key = config.api_key_for(provider, request.api_key)
    base_url = config.base_url_for(provider, request.base_url)
    connect_s, read_s = config.timeouts()
    policy = request.url_policy
    if provider == "openai_compatible":
        if not base_url:
            raise InvalidRequestError(
                "openai_compatible needs a base URL (OPENAI_COMPATIBLE_BASE_URL or the request's base_url)",
                provider=provider,
            )
        if policy is not None:
            # An owner's base URL: checked again now (its DNS answer may have changed since it was saved), and
            # every request the client makes, redirects included, goes through the same check.
            check_outbound_url(base_url, allowed_hosts=policy.allowed_hosts, allow_http=policy.allow_http)
        # Local servers usually take any key.
        return Connection(_openai(api_key or "not-needed", base_url, connect_s, read_s, policy), api_key)
    builders = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini}
    client = builders[provider](api_key or MISSING_KEY, base_url, connect_s, read_s, policy)
    return Connection(client, api_key)


def key_fingerprint(request: ChatRequest, provider: str) -> str:
    """Which key at which base URL a call used, as a short one-way hash: safe to store beside what that key's
    account issued (reasoning another key's account cannot verify) or to remember what it may not do."""
    base_url = config.base_url_for(provider, request.base_url) or ""
    api_key = config.api_key_for(provider, request.api_key) or ""
    return hashlib.sha256(f"{provider}\0{base_url}\0{api_key}".encode()).hexdigest()[:16]


def _http_client(connect_s: float, read_s: float, policy: UrlPolicy | None) -> httpx2.Client | None:
    """The transport under an SDK client: the SDK's own (None) unless a URL policy guards every request."""
    if policy is None:
        return None
    # Every request's URL re-checked (redirects included) and every connection made only to an address vetted in
    # the same lookup (DNS rebinding): providers/urlguard.py.
    return guarded_client(
        allowed_hosts=policy.allowed_hosts,
        allow_http=policy.allow_http,
        timeout=httpx2.Timeout(read_s, connect=connect_s),
    )


@lru_cache(maxsize=32)
def _openai(api_key: str, base_url: str | None, connect_s: float, read_s: float, policy: UrlPolicy | None):
    http_client = _http_client(connect_s, read_s, policy)
    extra = {"http_client": http_client} if http_client is not None else {}
    return openai.OpenAI(
        api_key=api_key, base_url=base_url, max_retries=0, timeout=openai.Timeout(read_s, connect=connect_s), **extra
    )


@lru_cache(maxsize=32)
def _anthropic(api_key: str, base_url: str | None, connect_s: float, read_s: float, policy: UrlPolicy | None):
    http_client = _http_client(connect_s, read_s, policy)
    extra = {"http_client": http_client} if http_client is not None else {}
    return anthropic.Anthropic(
        api_key=api_key,
        base_url=base_url,
        max_retries=0,
        timeout=anthropic.Timeout(read_s, connect=connect_s),
        **extra,
    )


@lru_cache(maxsize=32)
def _gemini(api_key: str, base_url: str | None, connect_s: float, read_s: float, policy: UrlPolicy | None):
    options = genai_types.HttpOptions(
        base_url=base_url,
        timeout=int((connect_s + read_s) * 1000),
        retry_options=genai_types.HttpRetryOptions(attempts=1),
    )
    http_client = _http_client(connect_s, read_s, policy)
    if http_client is not None:
        options.httpx_client = http_client
    return genai.Client(api_key=api_key, http_options=options)


# --- errors ------------------------------------------------------------------------------------------------------


def _openai_text(body, fallback: str) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            code = inner.get("code")
            message = inner.get("message") or fallback
            return f"{message} ({code})" if code else str(message)
    return fallback


def _gemini_retry_delay(exc: genai_errors.APIError) -> float | None:
    details = ((exc.details or {}).get("error") or {}).get("details") or []
    for detail in details:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return float(delay[:-1])
            except ValueError:
                return None
    return None


def map_error(exc: BaseException, *, provider: str, api_key: str | None) -> ProviderError:
    """Any SDK's exception as a typed ProviderError whose message holds no key."""
    markers = CONTEXT_MARKERS.get(provider, CONTEXT_MARKERS["openai"])
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc.__cause__, ProviderError):  # raised by our own request hook (the URL guard) inside the SDK
        return exc.__cause__
    if isinstance(exc, openai.APIStatusError):
        text = scrub(_openai_text(exc.body, exc.message), [api_key])
        retry_after = parse_retry_after(exc.response.headers)
        return classify_status(
            exc.status_code, text, provider=provider, retry_after=retry_after, context_markers=markers
        )
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else {}
        text = scrub(str(error.get("message") or exc.message), [api_key])
        status = exc.status_code
        if status == 200:
            status = ANTHROPIC_STREAM_ERROR_STATUS.get(error.get("type"), 500)
        retry_after = parse_retry_after(exc.response.headers)
        return classify_status(status, text, provider=provider, retry_after=retry_after, context_markers=markers)
    if isinstance(exc, genai_errors.APIError):
        text = scrub(str(exc.message or exc.status or "error"), [api_key])
        code = int(exc.code or 500)
        if "api key not valid" in text.lower() or exc.status in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            return AuthError(f"{provider} returned {code}: {text}", provider=provider, status=code)
        if code == 429 or exc.status == "RESOURCE_EXHAUSTED":
            return RateLimitedError(
                f"{provider} returned {code}: {text}",
                provider=provider,
                status=code,
                retry_after=_gemini_retry_delay(exc),
            )
        return classify_status(code, text, provider=provider, context_markers=markers)
    if isinstance(exc, (openai.APITimeoutError, anthropic.APITimeoutError)):
        return NetworkError(f"{provider}: request timed out", provider=provider)
    if isinstance(exc, (openai.APIConnectionError, anthropic.APIConnectionError)):
        return NetworkError(f"{provider}: connection failed", provider=provider)
    if isinstance(exc, openai.APIError):
        return ServerError(scrub(f"{provider}: {exc.message}", [api_key]), provider=provider)
    if isinstance(exc, TRANSPORT_ERRORS):
        return NetworkError(f"{provider}: connection failed ({type(exc).__name__})", provider=provider)
    return ServerError(scrub(f"{provider}: unexpected {type(exc).__name__}: {exc}", [api_key]), provider=provider)
