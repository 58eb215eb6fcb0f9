"""Open the product's real WebSocket (the ASGI app, session auth, the Redis channel layer) from tests."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid

from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client


def session_cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


class SocketClient:
    """A synchronous wrapper so plain pytest tests can drive a socket.

    The communicator's application task is bound to one event loop, and the Redis channel
    layer refuses to receive from two loops at once, so every socket of the test process runs
    on one shared loop kept in a background thread.
    """

    _loop: asyncio.AbstractEventLoop | None = None
    _loop_lock = threading.Lock()
    # Every socket made in this process, so the end of a test can end the ones it left open: a consumer whose
    # client never said goodbye keeps its periodic session re-check running into the next tests.
    _made: list[SocketClient] = []

    @classmethod
    def _shared_loop(cls) -> asyncio.AbstractEventLoop:
        with cls._loop_lock:
            if cls._loop is None:
                cls._loop = asyncio.new_event_loop()
                threading.Thread(target=cls._loop.run_forever, daemon=True, name="test-sockets").start()
            return cls._loop

    def __init__(
        self, path: str, *, user=None, cookie: str | None = None, origin: str = "http://localhost", host="localhost"
    ):
        """A socket logged in as `user` (a fresh session), or with a given session `cookie` (one the test ends)."""
        from opencompany.asgi import application

        self._loop = self._shared_loop()

        headers = [(b"origin", origin.encode()), (b"host", host.encode())]
        if user is not None:
            cookie = session_cookie_for(user)
        if cookie is not None:
            headers.append((b"cookie", cookie.encode()))
        self.communicator = self._run(self._make(application, path, headers))
        self.connected = False
        self.close_code = None
        self._pending: list[dict] = []  # the hello read by connect(), handed out by the next receive()
        SocketClient._made.append(self)

    @classmethod
    def end_all(cls) -> None:
        """Say goodbye for every socket still running its consumer (also the ones the server closed: a consumer
        that closed keeps running until the client's disconnect arrives, as it would from daphne)."""
        made, cls._made = cls._made, []
        for client in made:
            if not client.communicator.future.done():
                try:
                    client._run(client.communicator.disconnect(timeout=5), timeout=10)
                except (Exception, asyncio.CancelledError):  # an app that already failed has nothing left to end
                    pass
            client.connected = False

    async def _make(self, application, path, headers):
        return WebsocketCommunicator(application, path, headers=headers)

    def _run(self, coroutine, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def connect(self) -> bool:
        """True once the socket is open; False when it was refused, with the refusal's code in `close_code`: an
        HTTP 403 handshake (a foreign origin, no code) or, as a client sees a refusal with a reason, a handshake
        accepted and closed at once (4401, 4404: core/origins.py). An open socket always says hello first."""
        connected, code = self._run(self.communicator.connect(timeout=5))
        if connected:
            first = self._run(self.communicator.receive_output(timeout=5))
            if first["type"] == "websocket.close":
                connected, code = False, first.get("code")
            else:
                self._pending.append(first)
        self.connected = connected
        self.close_code = code
        return connected

    def receive(self, timeout: float = 3) -> dict:
        if self._pending:
            return json.loads(self._pending.pop(0)["text"])
        return self._run(self.communicator.receive_json_from(timeout=timeout))

    def assert_nothing_before_marker(self, workflow_id: int) -> None:
        """Prove that nothing was sent to this socket so far, without waiting on time: this process's one sender
        sends in hand-over order, so a marker handed over now arrives after anything handed over before it (to the
        workflow this socket listens on, or, if routing were wrong, to any group it should not be in)."""
        from core.realtime import send_workflow_event_now

        marker = {"type": "test.marker", "nonce": uuid.uuid4().hex}
        send_workflow_event_now(workflow_id=workflow_id, event=marker)
        received = self.receive()
        assert received == marker, f"the socket received {received!r} before the marker"

    def close(self) -> None:
        if self.connected:
            self._run(self.communicator.disconnect())
            self.connected = False
