"""Issue 34 (Medium): a body over REQUEST_MAX_BYTES is refused by the web server before it is read — a declared
length at once, a chunked body the moment it passes the limit — measured on a real daphne: the time to the 413 and
the web process's memory."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests

from core.body_limit import LINGER_SECONDS
from tests.processes import start_web_server

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024


def _rss(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _read_answer(sock: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it ends its side (or `timeout` passes: a bound on a failure)."""
    sock.settimeout(timeout)
    received = b""
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _assert_413(answer: bytes) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:200]
    assert json.loads(body)["code"] == "request_too_large"


@pytest.fixture
def web(tmp_path):
    process, base_url = start_web_server(tmp_path)
    try:
        # Warm the process up (imports, the first request's connections) before its memory is read.
        for _ in range(3):
            requests.post(f"{base_url}/api/workflows/", json={"name": "warm"}, timeout=10)
        yield process, urlsplit(base_url).port
        time.sleep(LINGER_SECONDS + 0.5)  # past the cut of the refused connections
        assert "Traceback" not in process.log()  # refusing is an answer, never an error in the server
    finally:
        process.stop()


def _headers(port: int, framing: str) -> bytes:
    lines = ["POST /api/workflows/ HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json", framing]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_declared_900_mib_body_is_answered_at_once_without_reading_it(web):
    process, port = web
    before = _rss(process.pid)
    times = []
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            started = time.monotonic()
            # Headers only: a server that waits for the body never answers (the bound below is a failure's).
            sock.sendall(_headers(port, f"Content-Length: {900 * MIB}"))
            answer = _read_answer(sock, timeout=10)
            times.append(time.monotonic() - started)
        _assert_413(answer)
    grown = _rss(process.pid) - before
    print(f"declared 900 MiB: 413 after {min(times) * 1000:.1f} ms (best of 3); web RSS grew {grown / MIB:.1f} MiB")
    assert min(times) < 0.1
    assert grown < 20 * MIB


def test_a_chunked_body_is_cut_at_the_limit_as_it_streams(web):
    process, port = web
    before = _rss(process.pid)
    chunk = b"x" * MIB
    sent = [0]
    sent_when_answered = None

    def send_400_mib(sock: socket.socket) -> None:
        # As fast as the server takes it, until the server stops taking it.
        with contextlib.suppress(OSError):
            while sent[0] < 400 * MIB:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent[0] += len(chunk)

    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_headers(port, "Transfer-Encoding: chunked"))
        sender = threading.Thread(target=send_400_mib, args=(sock,), daemon=True)
        sender.start()
        sock.settimeout(30)
        first = sock.recv(65536)  # blocks until the server answers (a bound on a failure)
        sent_when_answered = sent[0]
        answer = first + _read_answer(sock, timeout=10)
        sender.join(timeout=30)
    _assert_413(answer)
    grown = _rss(process.pid) - before
    print(
        f"chunked: 413 when the client had sent {sent_when_answered / MIB:.0f} MiB of 400 (limit 2 MiB); "
        f"web RSS grew {grown / MIB:.1f} MiB"
    )
    # Socket buffers hold a few MiB between the client's count and the server's: the answer came at the limit,
    # not at the end of the body.
    assert sent_when_answered < 32 * MIB
    assert grown < 20 * MIB


def test_a_body_within_the_limit_still_reaches_the_application(web):
    _, port = web
    base = f"http://127.0.0.1:{port}"
    answer = requests.post(f"{base}/api/workflows/", data=json.dumps({"name": "x" * MIB}), timeout=10)
    assert answer.status_code == 401  # read and handled by Django (anonymous), not refused for its size
