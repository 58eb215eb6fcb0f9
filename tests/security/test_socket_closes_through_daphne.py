"""Socket closes through the real web server (daphne), not only the consumer (issue 34): a socket of a user changed
by another, short-lived process closes at once; a refused socket gets the close code docs/security.md names."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.test import Client
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from tests.processes import REPO_ROOT, child_env, start_web_server
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    # The periodic re-check is pushed out of the test's reach: a close can only come from the change itself.
    process, base_url = start_web_server(tmp_path_factory.mktemp("daphne"), WEBSOCKET_RECHECK_SECONDS="3600")
    yield base_url
    process.stop()


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def open_socket(base_url: str, path: str, cookie: str):
    url = base_url.replace("http://", "ws://") + path
    return ws_connect(url, additional_headers={"Cookie": cookie, "Origin": base_url}, open_timeout=20)


def close_code(socket, *, timeout: float) -> int:
    """The code of the close that comes within `timeout` seconds (events before it are skipped); fails the test
    when none comes (a bound on a failure, not a speed asserted)."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, "the socket was not closed in time"
        try:
            socket.recv(timeout=remaining)
        except TimeoutError:
            continue
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else closed.code


def manage(*args: str) -> None:
    """A short-lived process, as an operator runs one: it exits right after its commit."""
    command = [sys.executable, "manage.py", *args]
    subprocess.run(command, cwd=REPO_ROOT, env=child_env(), check=True, timeout=120, capture_output=True)


def test_a_user_deactivated_by_a_management_command_has_their_sockets_closed_at_once(web, owner):
    workflow = Workflow.objects.create(owner=owner, name="w")
    with open_socket(web, f"/ws/workflows/{workflow.pk}/", session_cookie(owner)) as socket:
        assert json.loads(socket.recv(timeout=10))["type"] == "hello"
        deactivate = (
            "from django.contrib.auth import get_user_model; "
            f"user = get_user_model().objects.get(pk={owner.pk}); user.is_active = False; user.save()"
        )
        manage("shell", "-c", deactivate)
        assert close_code(socket, timeout=20) == 4401


def test_changing_ones_password_on_the_settings_page_closes_the_other_sessions_sockets(web, owner):
    workflow = Workflow.objects.create(owner=owner, name="w")
    changer = Client()
    changer.force_login(owner)
    with open_socket(web, f"/ws/workflows/{workflow.pk}/", session_cookie(owner)) as other:
        assert json.loads(other.recv(timeout=10))["type"] == "hello"
        new = "a-brand-new-passphrase-42"
        form = {"old_password": "pw-for-tests-1", "new_password1": new, "new_password2": new}
        assert changer.post("/settings/password/", form).status_code == 302
        assert close_code(other, timeout=20) == 4401


@pytest.mark.parametrize("who", ["nobody", "another owner", "the owner"])
def test_refused_sockets_are_closed_with_the_documented_codes(web, owner, other_owner, who):
    """A refusal with a reason is a handshake accepted and closed at once (4401, 4404), which a page can read; a
    foreign origin is an HTTP 403 handshake. Through daphne, since the ASGI server decides what a client sees."""
    workflow = Workflow.objects.create(owner=owner, name="w")
    cookie = {"nobody": "", "another owner": session_cookie(other_owner), "the owner": session_cookie(owner)}[who]
    if who != "the owner":
        with open_socket(web, f"/ws/workflows/{workflow.pk}/", cookie) as socket:
            assert close_code(socket, timeout=20) == (4401 if who == "nobody" else 4404)
    with open_socket(web, "/ws/workflows/abc/", cookie) as socket:
        assert close_code(socket, timeout=20) == 4404
    url = web.replace("http://", "ws://") + f"/ws/workflows/{workflow.pk}/"
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(url, additional_headers={"Cookie": cookie, "Origin": "http://evil.example"}, open_timeout=20)
    assert refused.value.response.status_code == 403
