"""Signing in to Vertex and the SDK client: the owner's credentials (never the host's own identity), the client of
one run, and the SDK's failures as provider errors."""

from __future__ import annotations

import json

import google.oauth2.credentials
from google import genai
from google.auth import exceptions as auth_exceptions
from google.auth.transport.requests import Request
from google.genai import _interactions_errors as interaction_errors
from google.genai import types
from google.oauth2 import service_account

from ... import config
from ...errors import AuthError, NetworkError, ProviderError, RateLimitedError, ServerError, classify_status
from ...types import ChatRequest
from .params import PROVIDER, VertexParams

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"


def _secret(request: ChatRequest) -> str | None:
    """The owner's stored key, else VERTEX_AGENT_CREDENTIALS, else the file GOOGLE_APPLICATION_CREDENTIALS names."""
    value = config.api_key_for(PROVIDER, request.api_key)
    if value:
        return value.strip()
    path = config.setting("GOOGLE_APPLICATION_CREDENTIALS")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read().strip()
        except OSError as exc:
            raise AuthError(f"GOOGLE_APPLICATION_CREDENTIALS cannot be read: {exc}", provider=PROVIDER) from None
    return None


def credentials_from(secret: str | None):
    """A service account JSON (its own token endpoint signs us in) or an OAuth access token. Never the metadata
    server or gcloud's defaults: a worker must not quietly act as whatever identity its host happens to have."""
    if not secret:
        raise AuthError(
            "no Vertex credentials: store a service account JSON or an access token on the provider keys page, or "
            "set VERTEX_AGENT_CREDENTIALS",
            provider=PROVIDER,
        )
    if secret.startswith("{"):
        try:
            info = json.loads(secret)
        except ValueError:
            raise AuthError("the stored Vertex credentials are not valid JSON", provider=PROVIDER) from None
        if info.get("type") != "service_account":
            raise AuthError("Vertex credentials JSON must be a service account key", provider=PROVIDER)
        allowed = [u.strip() for u in str(config.setting("VERTEX_AGENT_TOKEN_URIS") or GOOGLE_TOKEN_URI).split(",")]
        if info.get("token_uri") not in allowed:
            # The key file names where it signs in; an owner's key must not make the server post to any URL.
            raise AuthError(
                f"the service account key's token_uri is not an allowed sign-in endpoint ({', '.join(allowed)})",
                provider=PROVIDER,
            )
        try:
            return service_account.Credentials.from_service_account_info(info, scopes=list(SCOPES))
        except (ValueError, KeyError) as exc:
            raise AuthError(f"the service account key is unusable: {exc}", provider=PROVIDER) from None
    return google.oauth2.credentials.Credentials(token=secret)


def make_client(request: ChatRequest, params: VertexParams, *, wall_seconds: float):
    credentials = credentials_from(_secret(request))
    base_url = config.base_url_for(PROVIDER, request.base_url)
    connect, read = config.timeouts()
    options = types.HttpOptions(
        base_url=base_url or None,
        timeout=int(min(connect + read, max(wall_seconds, 1.0)) * 1000),
        retry_options=types.HttpRetryOptions(attempts=1),  # one attempt: a retried interaction is billed twice
    )
    return genai.Client(
        vertexai=True,
        project=params.project,
        location=params.location,
        credentials=credentials,
        http_options=options,
    )


def map_error(exc: BaseException) -> ProviderError:
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, auth_exceptions.GoogleAuthError):
        return AuthError(f"{PROVIDER}: signing in failed: {exc}", provider=PROVIDER)
    if isinstance(exc, interaction_errors.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = body.get("error") if isinstance(body.get("error"), dict) else body
        text = str((detail or {}).get("message") or exc.message or "error")
        status = int(exc.status_code)
        if status == 429:
            return RateLimitedError(f"{PROVIDER} returned 429: {text}", provider=PROVIDER, status=429)
        return classify_status(status, text, provider=PROVIDER)
    if isinstance(exc, interaction_errors.APIConnectionError | OSError):
        return NetworkError(f"{PROVIDER}: connection failed ({type(exc).__name__})", provider=PROVIDER)
    return ServerError(f"{PROVIDER}: unexpected {type(exc).__name__}: {exc}", provider=PROVIDER)


def check_credentials(request: ChatRequest) -> None:
    """Prove the stored credentials sign in: a service account gets an access token from its token endpoint (no
    interaction, nothing billed); an access token is taken as given (Google checks it on the first call)."""
    credentials = credentials_from(_secret(request))
    if getattr(credentials, "token", None) and not hasattr(credentials, "service_account_email"):
        return
    try:
        credentials.refresh(Request())
    except Exception as exc:
        raise map_error(exc) from exc
