"""Sockets follow the session: exact origins, closed at logout / password change / workflow delete, unknown
routes refused with 4404, client frames limited in size and nesting before they are parsed."""

from __future__ import annotations

import json
import time

import pytest
from django.conf import settings
from django.test import Client

from tests.realtime import SocketClient
from tests.waiting import wait_until
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


class CookieSocket(SocketClient):
    """A SocketClient opened with a given session cookie (the page's own), so the test can end that session."""

    def __init__(self, path: str, *, cookie: str, origin: str = "http://localhost", host: str = "localhost"):
        super().__init__(path, cookie=cookie, origin=origin, host=host)

    def wait_closed(self, timeout: float) -> dict:
        """The next output that is a close, skipping events; fails the test when none comes within `timeout`
        seconds (a bound on a failure, not a speed asserted)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the socket was not closed in time"
            output = self._run(self.communicator.receive_output(timeout=remaining))
            if output["type"] == "websocket.close":
                self.connected = False
                return output


def logged_in(user) -> tuple[Client, str]:
    client = Client()
    client.force_login(user)
    return client, f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """A closed socket leaves the process-wide layer bound to its stopped loop (see conftest.open_socket)."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def workflow(owner):
    return Workflow.objects.create(owner=owner, name="w")


def test_a_foreign_port_in_origin_is_refused(owner, workflow):
    _, cookie = logged_in(owner)
    path = f"/ws/workflows/{workflow.pk}/"
    for origin in ("http://localhost:9999", "https://localhost", "http://localhost.evil.example", "null", ""):
        socket = CookieSocket(path, cookie=cookie, origin=origin, host="localhost")
        assert not socket.connect(), origin
        # Refused without a consumer: nothing of the socket waits on (or holds a connection to) the channel layer.
        wait_until(socket.communicator.future.done, timeout=5, what="the refused socket's application to end")
    same = CookieSocket(path, cookie=cookie, origin="http://127.0.0.1:8000", host="127.0.0.1:8000")
    assert same.connect()
    same.close()
    other_port = CookieSocket(path, cookie=cookie, origin="http://127.0.0.1:9999", host="127.0.0.1:8000")
    assert not other_port.connect()


def test_configured_origins_are_matched_exactly(owner, workflow, settings):
    settings.WEBSOCKET_ALLOWED_ORIGINS = ["https://app.example.com"]
    _, cookie = logged_in(owner)
    path = f"/ws/workflows/{workflow.pk}/"
    assert not CookieSocket(path, cookie=cookie, origin="https://app.example.com:8443").connect()
    assert not CookieSocket(path, cookie=cookie, origin="http://app.example.com").connect()
    assert not CookieSocket(path, cookie=cookie, origin="http://localhost").connect()  # same-origin is not enough
    good = CookieSocket(path, cookie=cookie, origin="https://app.example.com:443")
    assert good.connect()
    good.close()


def test_logout_closes_the_sessions_sockets_at_once(owner, workflow, settings):
    # The periodic re-check is pushed out of the test's reach, so the close can only come from the logout itself.
    settings.WEBSOCKET_RECHECK_SECONDS = 3600
    client, cookie = logged_in(owner)
    _, other_cookie = logged_in(owner)  # the same owner in another browser stays connected
    socket = CookieSocket(f"/ws/workflows/{workflow.pk}/", cookie=cookie)
    other = CookieSocket(f"/ws/workflows/{workflow.pk}/", cookie=other_cookie)
    assert socket.connect() and other.connect()
    try:
        assert socket.receive()["type"] == "hello" and other.receive()["type"] == "hello"
        assert client.post("/logout/").status_code == 302
        assert socket.wait_closed(timeout=10)["code"] == 4401
        other.assert_nothing_before_marker(workflow.pk)
    finally:
        socket.close()
        other.close()


def test_a_password_change_closes_the_other_sessions_sockets(owner, workflow, settings):
    settings.WEBSOCKET_RECHECK_SECONDS = 3600  # the close can only come from the password change
    _, cookie = logged_in(owner)
    socket = CookieSocket(f"/ws/workflows/{workflow.pk}/", cookie=cookie)
    assert socket.connect()
    try:
        socket.receive()
        owner.set_password("a-brand-new-passphrase-42")
        owner.save()
        assert socket.wait_closed(timeout=10)["code"] == 4401
    finally:
        socket.close()


def test_deleting_the_workflow_closes_its_sockets(owner, workflow, settings):
    from workflows.services import workflow_delete

    settings.WEBSOCKET_RECHECK_SECONDS = 3600  # the close can only come from the delete

    _, cookie = logged_in(owner)
    socket = CookieSocket(f"/ws/workflows/{workflow.pk}/", cookie=cookie)
    assert socket.connect()
    try:
        socket.receive()
        workflow_delete(workflow=workflow)
        assert socket.wait_closed(timeout=10)["code"] == 4404
    finally:
        socket.close()


@pytest.mark.parametrize("path", ["/ws/workflows/abc/", "/ws/nothing/", "/ws/workflows/1/extra/"])
def test_unknown_socket_routes_close_with_4404(owner, path):
    _, cookie = logged_in(owner)
    socket = CookieSocket(path, cookie=cookie)
    assert not socket.connect()
    assert socket.close_code == 4404


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("[" * 100_000 + "]" * 100_000, 4009),  # too big before anything else is looked at
        ("x" * 5000, 4009),
        ('{"a": [[[[["deep"]]]]]}', 4008),  # small but nested past the limit: refused unparsed
        ("not json", 4007),
    ],
)
def test_client_frames_are_limited_before_parsing(owner, workflow, frame, code):
    _, cookie = logged_in(owner)
    socket = CookieSocket(f"/ws/workflows/{workflow.pk}/", cookie=cookie)
    assert socket.connect()
    try:
        socket.receive()
        socket._run(socket.communicator.send_to(text_data=frame))
        assert socket.wait_closed(timeout=10)["code"] == code
    finally:
        socket.close()


def test_a_ping_with_brackets_in_strings_is_answered(owner, workflow):
    _, cookie = logged_in(owner)
    socket = CookieSocket(f"/ws/workflows/{workflow.pk}/", cookie=cookie)
    assert socket.connect()
    try:
        socket.receive()
        socket._run(socket.communicator.send_to(text_data='{"type": "ping", "note": "[[[[[[[[{{{{"}'))
        assert socket.receive() == {"type": "pong"}
    finally:
        socket.close()


def test_refused_frames_close_cleanly_through_daphne_and_leave_every_group(owner, workflow, tmp_path):
    """Through the real server: each refused frame closes with its documented 4xxx code (daphne's WebSocket library
    forbids 1007-1009 from the server), nothing crashes, and the socket's groups are gone from Redis."""
    import redis
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from core.realtime import session_group_name, user_group_name, workflow_group_name
    from tests.processes import start_web_server

    client, cookie = logged_in(owner)
    session_key = client.cookies[settings.SESSION_COOKIE_NAME].value
    groups = [workflow_group_name(workflow.pk), user_group_name(owner.pk), session_group_name(session_key)]
    store = redis.Redis.from_url(settings.REDIS_URL)

    def members() -> list[int]:
        return [store.zcard(f"asgi:group:{group}") for group in groups]

    web, base_url = start_web_server(tmp_path)
    try:
        frames = [
            ("x" * 5000, 4009),
            ("[" * 100_000 + "]" * 100_000, 4009),
            ('{"a": [[[[["deep"]]]]]}', 4008),
            ("not json", 4007),
            (b"\x00\x01binary", 4007),
        ]
        for frame, code in frames:
            url = base_url.replace("http://", "ws://") + f"/ws/workflows/{workflow.pk}/"
            with connect(url, additional_headers={"Cookie": cookie, "Origin": base_url}, open_timeout=10) as socket:
                assert json.loads(socket.recv(timeout=10))["type"] == "hello"
                assert members() == [1, 1, 1]  # the socket is in its three groups
                socket.send(frame)
                with pytest.raises(ConnectionClosed) as closed:
                    socket.recv(timeout=10)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == code, (frame[:10], closed.value)
            wait_until(lambda: members() == [0, 0, 0], timeout=10, what="the refused socket to leave its groups")
        assert "Traceback" not in web.log()
    finally:
        web.stop()
