"""An HTTP MCP server's session through the SDK's client: Streamable HTTP, the older HTTP+SSE, or detect.

Every transport goes through one guarded client (core/outbound.py): each connection only to addresses vetted in its
own lookup, every request's URL checked again (redirects and the session's later requests included), responses
size-capped. Detect follows the MCP specification's backwards-compatibility rule: POST the InitializeRequest to the
URL (Streamable HTTP); if that fails with a 4xx other than 401/403 (an old server answers 404 or 405: it has no
POST there), GET the same URL as an HTTP+SSE stream instead.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager

import httpx2
from django.conf import settings
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from core.outbound import guarded_async_http_client
from providers.urlguard import UnsafeURLError, check_outbound_url, connection_vet

from .errors import McpFailure

STREAMABLE, SSE, DETECT = "http", "sse", "auto"
HTTP_TRANSPORTS = (STREAMABLE, SSE, DETECT)
URL_HINT = "Ask staff to add the host to MCP_HTTP_ALLOWED_HOSTS if it is a server you run."
# Statuses of the first POST that do not mean "no Streamable HTTP here": the credentials were refused.
NOT_A_TRANSPORT_ANSWER = (401, 403)


def checked_url(url: str) -> str:
    """The URL when owners may reach it (providers.urlguard, the check owners' base URLs pass), else McpFailure."""
    if not url:
        raise McpFailure("invalid_url", "The MCP server node has no URL.")
    try:
        return check_outbound_url(
            url,
            allowed_hosts=settings.MCP_HTTP_ALLOWED_HOSTS,
            allow_http=settings.MCP_HTTP_ALLOW_HTTP,
            what="MCP server URL",
            allow_hint=URL_HINT,
        )
    except UnsafeURLError as exc:
        raise McpFailure("unsafe_url", exc.message) from None


def _too_large(size: int) -> McpFailure:
    return McpFailure(
        "response_too_large", f"The MCP server answered with {size} bytes, more than {settings.MCP_RESPONSE_MAX_BYTES}."
    )


class _CappedStream(httpx2.AsyncByteStream):
    """An event stream cut off once it carried more than MCP_RESPONSE_MAX_BYTES: an HTTP+SSE session reads every
    answer from one GET stream, whose size no header says. The SDK reports the cut as a closed connection, so the
    reason is also kept in `notes` for the session to raise instead."""

    def __init__(self, stream: httpx2.AsyncByteStream, cap: int, notes: dict):
        self._stream, self._cap, self._seen, self._notes = stream, cap, 0, notes

    async def __aiter__(self):
        async for chunk in self._stream:
            self._seen += len(chunk)
            if self._seen > self._cap:
                self._notes["failure"] = _too_large(self._seen)
                raise self._notes["failure"]
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def _vet():
    vet = connection_vet(allowed_hosts=settings.MCP_HTTP_ALLOWED_HOSTS, what="MCP server URL", allow_hint=URL_HINT)

    def check(host: str, port: int, addresses: list[str]) -> None:
        try:
            vet(host, port, addresses)
        except UnsafeURLError as exc:
            raise McpFailure("unsafe_url", exc.message) from None

    return check


def _client(headers: dict[str, str], timeout: float, notes: dict) -> httpx2.AsyncClient:
    """The guarded client one session uses. `notes` keeps the status of its first POST (detect reads it) and why
    a stream was cut off."""

    async def check_request(request) -> None:
        # Every request, redirects and the session's later requests included (docs/security.md).
        checked_url(str(request.url))

    async def check_response(response) -> None:
        if "status" not in notes and response.request.method == "POST":
            notes["status"] = response.status_code
        length = response.headers.get("content-length")
        if length and length.isdigit() and int(length) > settings.MCP_RESPONSE_MAX_BYTES:
            raise _too_large(int(length))
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            response.stream = _CappedStream(response.stream, settings.MCP_RESPONSE_MAX_BYTES, notes)

    return guarded_async_http_client(
        vet=_vet(),
        headers=headers,
        timeout=httpx2.Timeout(min(30.0, timeout), read=timeout),
        event_hooks={"request": [check_request], "response": [check_response]},
    )


def _streamable(url: str, http: httpx2.AsyncClient):
    return streamable_http_client(url, http_client=http, max_sse_event_size=settings.MCP_RESPONSE_MAX_BYTES)


def _sse(url: str, http: httpx2.AsyncClient):
    # The SDK builds the SSE transport's client through a factory: hand it the guarded one (its own timeouts).
    return sse_client(url, httpx_client_factory=lambda headers=None, timeout=None, auth=None: http)


@asynccontextmanager
async def http_session(*, kind: str, url: str, headers: dict[str, str], timeout: float):
    """An initialized `mcp.Client` on the server at `url` (already `checked_url`), `headers` already resolved."""
    notes: dict = {}
    async with AsyncExitStack() as stack:

        def http() -> httpx2.AsyncClient:
            made = _client(headers, timeout, notes)
            stack.push_async_callback(made.aclose)  # closed with the session, a failed detect attempt's too
            return made

        client = None
        if kind == DETECT:
            try:
                client = await stack.enter_async_context(
                    Client(_streamable(url, http()), read_timeout_seconds=timeout, cache=None)
                )
            except Exception:
                status = notes.get("status") or 0
                if not (400 <= status < 500) or status in NOT_A_TRANSPORT_ANSWER:
                    raise
                notes.clear()
        if client is None:
            make = _sse if kind in (SSE, DETECT) else _streamable
            client = await stack.enter_async_context(
                Client(make(url, http()), read_timeout_seconds=timeout, cache=None)
            )
        try:
            yield client
        except Exception:
            if notes.get("failure") is not None:
                raise notes["failure"] from None
            raise
