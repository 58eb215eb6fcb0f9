"""Run events on the workflow's socket (SPEC §6, §7): every event of a run carries a `seq` per run and the hub epoch.

The seq counter and the text streamed so far live in Redis, next to the channel layer: a delta batch appends its
text and takes its seq in one MULTI, so a snapshot (text so far + seq) read in one MULTI is exactly consistent with
the deltas that follow it. When Redis loses its memory the hub epoch changes too (opencompany/hub.py), so a client
comparing epochs never trusts a counter that restarted. Only deltas carry content (the answer's text); every other
event is metadata (ids, states, counts, tool names).
"""

from __future__ import annotations

import logging
import os
import threading

import redis
from django.conf import settings
from django.db import transaction

from opencompany.hub import hub_epoch
from opencompany.realtime import send_workflow_event_now

logger = logging.getLogger("chat.events")

_client_lock = threading.Lock()
_client: tuple[int, redis.Redis] | None = None


def _redis() -> redis.Redis:
    global _client
    pid = os.getpid()
    with _client_lock:
        if _client is None or _client[0] != pid:  # a forked worker must not share its parent's sockets
            _client = (pid, redis.Redis.from_url(settings.REDIS_URL))
        return _client[1]


def _seq_key(run_id: int) -> str:
    return f"opencompany:chat:run:{int(run_id)}:seq"


def _text_key(run_id: int) -> str:
    return f"opencompany:chat:run:{int(run_id)}:text"


def _next_seq(run_id: int, append_text: str | None = None, *, first: bool = False) -> int:
    ttl = settings.CHAT_RUN_STREAM_TTL_SECONDS
    pipe = _redis().pipeline(transaction=True)
    if first:  # a run's first event starts its counter (ids of a recreated test database repeat)
        pipe.delete(_seq_key(run_id), _text_key(run_id))
    pipe.incr(_seq_key(run_id))
    pipe.expire(_seq_key(run_id), ttl)
    if append_text:
        pipe.append(_text_key(run_id), append_text.encode())
        pipe.expire(_text_key(run_id), ttl)
    return int(pipe.execute()[0])


def run_stream_state(run_id: int) -> tuple[int, str]:
    """(last seq sent, text streamed so far) of a run, read in one MULTI. (0, "") when Redis has nothing."""
    try:
        pipe = _redis().pipeline(transaction=True)
        pipe.get(_seq_key(run_id))
        pipe.get(_text_key(run_id))
        seq, text = pipe.execute()
    except redis.RedisError:
        return 0, ""
    return int(seq or 0), (text or b"").decode(errors="replace")


def send_run_event_now(
    *, workflow_id: int, run_id: int, event: dict, append_text: str | None = None, first: bool = False
) -> int | None:
    """Take the run's next seq and send. Returns the seq, or None when Redis refused (the event is dropped; the
    client sees the next event's gap and refetches)."""
    try:
        seq = _next_seq(run_id, append_text, first=first)
    except redis.RedisError:
        logger.warning("run event seq failed", extra={"run_id": run_id, "event_type": event.get("type")})
        return None
    send_workflow_event_now(
        workflow_id=workflow_id,
        event={**event, "run_id": run_id, "seq": seq, "hub_epoch": hub_epoch()},
    )
    return seq


def publish_run_event(*, workflow_id: int, run_id: int, event: dict, first: bool = False) -> None:
    """Send a run event once the current transaction commits (a rolled-back change never announces itself)."""
    transaction.on_commit(lambda: send_run_event_now(workflow_id=workflow_id, run_id=run_id, event=event, first=first))


def publish_chat_updated(*, workflow_id: int, revision: int, reason: str) -> None:
    """The thread changed shape (a branch move, feedback, clear): open pages refetch the snapshot."""
    transaction.on_commit(
        lambda: send_workflow_event_now(
            workflow_id=workflow_id,
            event={
                "type": "chat.updated",
                "workflow_id": workflow_id,
                "revision": revision,
                "reason": reason,
                "hub_epoch": hub_epoch(),
            },
        )
    )


def forget_run_stream(run_id: int) -> None:
    """Drop a run's streamed text (its reply is saved); the seq counter stays so late events keep counting."""
    try:
        _redis().delete(_text_key(run_id))
    except redis.RedisError:
        pass


class DeltaBatcher:
    """Batches an answer's text deltas: the first goes out at once (time to first text matters most), the rest
    at most every CHAT_DELTA_BATCH_MS, with a timer flushing whatever is left when the stream goes quiet."""

    def __init__(self, *, workflow_id: int, run_id: int):
        self.workflow_id = workflow_id
        self.run_id = run_id
        self._buffer: list[str] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._sent_any = False

    def add(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._buffer.append(text)
            if not self._sent_any:
                self._sent_any = True
                self._flush_locked()
                return
            if self._timer is None:
                self._timer = threading.Timer(settings.CHAT_DELTA_BATCH_MS / 1000.0, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._buffer:
            return
        text = "".join(self._buffer)
        self._buffer.clear()
        send_run_event_now(
            workflow_id=self.workflow_id,
            run_id=self.run_id,
            event={"type": "run.delta", "workflow_id": self.workflow_id, "text": text},
            append_text=text,
        )
