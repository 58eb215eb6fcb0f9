"""Map the openai SDK's exceptions (used by the Responses and the OpenAI-compatible adapters) to typed errors."""

from __future__ import annotations

import openai

from ..errors import NetworkError, ProviderError, ServerError, classify_status, parse_retry_after, scrub

CONTEXT_MARKERS = ("context_length_exceeded", "context window", "maximum context length", "too many tokens")


def _error_text(body, fallback: str) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            code = inner.get("code")
            message = inner.get("message") or fallback
            return f"{message} ({code})" if code else str(message)
    return fallback


def map_openai_error(exc: Exception, *, provider: str, api_key: str | None) -> ProviderError:
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc.__cause__, ProviderError):  # raised by our own request hook (the URL guard) inside the SDK
        return exc.__cause__
    if isinstance(exc, openai.APIStatusError):
        text = scrub(_error_text(exc.body, exc.message), [api_key])
        return classify_status(
            exc.status_code,
            text,
            provider=provider,
            retry_after=parse_retry_after(exc.response.headers),
            context_markers=CONTEXT_MARKERS,
        )
    if isinstance(exc, openai.APITimeoutError):
        return NetworkError(f"{provider}: request timed out", provider=provider)
    if isinstance(exc, openai.APIConnectionError):
        return NetworkError(f"{provider}: connection failed", provider=provider)
    if isinstance(exc, openai.APIError):
        return ServerError(scrub(f"{provider}: {exc.message}", [api_key]), provider=provider)
    return ServerError(scrub(f"{provider}: unexpected {type(exc).__name__}: {exc}", [api_key]), provider=provider)
