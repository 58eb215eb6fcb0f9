"""Which page origins may open a socket: exact scheme, host and port.

Channels' AllowedHostsOriginValidator compares the Origin's host with ALLOWED_HOSTS and ignores the port, so a
page on another port of the same host (another app, a dev server) could open a socket with the owner's cookie.
Here the Origin must equal one configured origin (WEBSOCKET_ALLOWED_ORIGINS), or, when none is configured, the
socket's own origin: the Host header it was opened to (itself checked against ALLOWED_HOSTS) with the matching
scheme, or one of CSRF_TRUSTED_ORIGINS.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_origin(value: str) -> str | None:
    """`scheme://host:port` with the default port written out, lower case; None when it is not an http(s) origin."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.query:
        return None
    if parts.username or parts.password:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port or _DEFAULT_PORTS[parts.scheme]}"


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _socket_scheme(scope) -> str:
    if scope.get("scheme") == "wss":
        return "https"
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        forwarded = _header(scope, proxy_header[0].removeprefix("HTTP_").lower().replace("_", "-").encode())
        if forwarded and forwarded.split(",")[0].strip() == proxy_header[1]:
            return "https"
    return "http"


def origin_allowed(scope) -> bool:
    origin = normalize_origin(_header(scope, b"origin") or "")
    if origin is None:
        return False  # browsers always send one; a socket without it is not from one of our pages
    configured = settings.WEBSOCKET_ALLOWED_ORIGINS
    if configured:
        return origin in {normalize_origin(item) for item in configured}
    if origin in {normalize_origin(item) for item in settings.CSRF_TRUSTED_ORIGINS}:
        return True
    host = _header(scope, b"host") or ""
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    return origin == normalize_origin(f"{_socket_scheme(scope)}://{host}")


class ExactOriginValidator:
    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await refuse_handshake(receive, send)
        return await self.application(scope, receive, send)


async def refuse_handshake(receive, send, *, code: int | None = None) -> None:
    """Refuse the socket and end. A consumer refusing in `connect()` is too late: Channels has already opened its
    channel-layer listener (a blocking Redis read), held until the client's disconnect arrives; Channels'
    WebsocketDenier is such a consumer.

    With a `code` (4401 session ended, 4404 not found) the handshake is accepted and the socket closed at once with
    that code: a close before the accept is an HTTP 403 (the ASGI spec), which tells the page nothing of why.
    Without one (a foreign origin) the handshake itself is refused with that 403: another site's page gets no
    socket at all."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    if code is None:
        await send({"type": "websocket.close"})
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": code})
