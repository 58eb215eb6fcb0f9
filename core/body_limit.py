"""Request bodies over REQUEST_MAX_BYTES are refused by the web server itself, before they are read.

Daphne (Twisted underneath) receives a request's whole body before it starts the application, then hands it over
as messages on an unbounded queue: a body checked by Django middleware has already been read in full and held in
the process's memory. This module teaches daphne's request to refuse at the door:

- a declared `Content-Length` over the limit is answered 413 `request_too_large` as soon as the headers are in,
  and nothing of the body is kept (the server half-closes after the answer, drops what still arrives and cuts
  the connection after LINGER_SECONDS; `Expect: 100-continue` is not honoured for it);
- a body without a declared length (`Transfer-Encoding: chunked`) is counted as it streams and cut with the same
  413 the moment it passes the limit.

`install()` runs when the ASGI application is imported (opencompany/asgi.py), in a process that has daphne. The
Django middleware (core/middleware.py) stays as the check for any other server. A proxy in front should enforce a
limit of its own too (docs/deploy.md, "Request size").
"""

from __future__ import annotations

import json

_BODY = "The request body is larger than {limit} bytes."
# How long a refused connection is drained (read and discarded) after the answer before it is cut.
LINGER_SECONDS = 2.0


def request_max_bytes(path: str) -> int:
    """The largest body a request to `path` may send: REQUEST_MAX_BYTES, or more for a path the settings name
    (REQUEST_MAX_BYTES_BY_PATH: the file upload)."""
    from django.conf import settings

    by_path = getattr(settings, "REQUEST_MAX_BYTES_BY_PATH", {}) or {}
    return max(settings.REQUEST_MAX_BYTES, by_path.get(path, 0))


def _path_of(raw: bytes | None) -> str:
    return (raw or b"").split(b"?", 1)[0].decode("latin-1")


def _discard(data: bytes) -> None:
    return None


def _refusal(limit: int) -> bytes:
    body = json.dumps({"code": "request_too_large", "message": _BODY.format(limit=limit)}).encode()
    head = (
        "HTTP/1.1 413 Content Too Large\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
        "Cache-Control: no-store\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Content-Security-Policy: default-src 'none'; frame-ancestors 'none'\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


def install() -> None:
    """Make daphne's HTTP requests refuse oversized bodies before reading them (idempotent)."""
    try:
        from daphne import http_protocol
    except ImportError:  # not served by daphne: the middleware's check is all there is
        return
    if getattr(http_protocol.WebRequest, "_opencompany_body_limit", False):
        return

    from io import BytesIO

    from twisted.internet import reactor
    from twisted.internet.interfaces import IHalfCloseableDescriptor

    base = http_protocol.WebRequest

    class LimitedWebRequest(base):
        _opencompany_body_limit = True
        _refused = False
        _received = 0

        def _limit(self) -> int:
            # The request line is parsed before the headers end; the channel keeps its path until the body is in.
            return request_max_bytes(_path_of(getattr(self.channel, "_path", None)))

        def gotLength(self, length):
            self._body_limit = limit = self._limit()
            if length is not None and length > limit:
                # No 100 Continue after our answer (the channel sends one when the client asks for it).
                self.requestHeaders.removeHeader(b"Expect")
                self.content = BytesIO()
                self._refuse(limit)
                return
            super().gotLength(length)

        def handleContentChunk(self, data):
            if self._refused:
                return  # bytes already in the buffer when the connection was closed
            self._received += len(data)
            limit = getattr(self, "_body_limit", None) or self._limit()
            if self._received > limit:
                self._refuse(limit)
                return
            super().handleContentChunk(data)

        def requestReceived(self, command, path, version):
            if self._refused:
                return  # the body that fit into the buffer already read must not reach the application
            super().requestReceived(command, path, version)

        def _refuse(self, limit: int) -> None:
            self._refused = True
            channel = self.channel
            transport = channel.transport
            # Whatever else arrives on this connection is dropped unparsed and unkept.
            channel.dataReceived = _discard
            transport.write(_refusal(limit))
            if IHalfCloseableDescriptor.providedBy(transport):
                # The answer, then our end of the stream; reading (and discarding) goes on a little, because closing
                # with unread bytes resets the connection and the client could lose the answer it has not read yet.
                transport.loseWriteConnection()
                reactor.callLater(LINGER_SECONDS, transport.abortConnection)
            else:
                transport.loseConnection()

    http_protocol.WebRequest = LimitedWebRequest
