"""The child's side of its channel to the parent: one JSON object per line written to the fd the parent passed
(events, and requests the parent answers), the answers read from stdin, one JSON object per line, matched by id."""

from __future__ import annotations

import json
import os
import sys
import threading

CHANNEL_FD = 3
_out_lock = threading.Lock()
_channel = None  # set by open_channel()
_waiting: dict[int, dict] = {}
_waiting_cv = threading.Condition()
_next_id = [0]


def open_channel(fd: int) -> None:
    global _channel
    _channel = os.fdopen(fd, "w", buffering=1, encoding="utf-8")


def send(event: dict) -> None:
    line = json.dumps(event, ensure_ascii=False, default=str) + "\n"
    with _out_lock:
        _channel.write(line)
        _channel.flush()


def request(event: dict) -> dict:
    """Send a request to the parent and wait for its answer (matched by id)."""
    with _waiting_cv:
        _next_id[0] += 1
        request_id = _next_id[0]
    send({**event, "id": request_id})
    with _waiting_cv:
        while request_id not in _waiting:
            if not _waiting_cv.wait(timeout=600):
                raise RuntimeError("the parent did not answer")
        return _waiting.pop(request_id)


def read_answers() -> None:
    for line in sys.stdin:
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        with _waiting_cv:
            _waiting[int(answer.get("id", 0))] = answer
            _waiting_cv.notify_all()
    os._exit(3)  # the parent is gone: nothing left to report to


def flush() -> None:
    _channel.flush()
