"""Typed provider errors. Every adapter maps its SDK's exceptions onto these so callers act on `code` alone.

The message is built by us from the status and the provider's text with any API key scrubbed out, so it is safe
to log, store on a run step and show to the owner.
"""

from __future__ import annotations

CODES = (
    "auth",
    "rate_limited",
    "context_too_long",
    "invalid_request",
    "server_error",
    "network",
    "truncated",
)


class ProviderError(Exception):
    code = "provider_error"
    retryable = False

    def __init__(
        self, message: str, *, provider: str = "", status: int | None = None, retry_after: float | None = None
    ):
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status = status
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict:
        data = {"code": self.code, "message": self.message, "provider": self.provider}
        if self.status is not None:
            data["status"] = self.status
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        return data


class AuthError(ProviderError):
    code = "auth"


class RateLimitedError(ProviderError):
    code = "rate_limited"
    retryable = True


class ContextTooLongError(ProviderError):
    code = "context_too_long"


class InvalidRequestError(ProviderError):
    code = "invalid_request"


class ServerError(ProviderError):
    code = "server_error"
    retryable = True


class NetworkError(ProviderError):
    code = "network"
    retryable = True


class TruncatedStreamError(ProviderError):
    """The stream ended (or broke) before the provider's terminal event: the reply is incomplete."""

    code = "truncated"
    retryable = True


class UnknownProviderError(InvalidRequestError):
    pass


def scrub(text: str, secrets: list[str | None]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def classify_status(
    status: int, text: str, *, provider: str, retry_after: float | None = None, context_markers: tuple[str, ...] = ()
) -> ProviderError:
    """Map an HTTP status and the provider's (already scrubbed) error text to a typed error."""
    message = f"{provider} returned {status}: {text}" if text else f"{provider} returned {status}"
    lowered = text.lower()
    if status in (401, 403):
        return AuthError(message, provider=provider, status=status)
    if status == 429:
        return RateLimitedError(message, provider=provider, status=status, retry_after=retry_after)
    if status in (400, 413, 422) and any(marker in lowered for marker in context_markers):
        return ContextTooLongError(message, provider=provider, status=status)
    if status == 408 or status >= 500:
        return ServerError(message, provider=provider, status=status)
    return InvalidRequestError(message, provider=provider, status=status)


def parse_retry_after(headers) -> float | None:
    if headers is None:
        return None
    for name in ("retry-after-ms", "retry-after"):
        value = headers.get(name)
        if not value:
            continue
        try:
            seconds = float(value)
        except ValueError:
            continue
        return seconds / 1000.0 if name == "retry-after-ms" else seconds
    return None
