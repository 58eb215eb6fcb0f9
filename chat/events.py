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
import time

import redis
from django.conf import settings
from django.db import transaction

from opencompany.hub import hub_epoch
from opencompany.realtime import send_workflow_event_now, sender

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


def reset_run_stream(run_id: int) -> None:
    """A new run starts its counter at zero (ids of a recreated test database repeat) and an empty streamed text.
    Called before the run's admission commits, so no event of the run can have been counted yet; harmless if the
    admission rolls back (an empty key that expires)."""
    try:
        pipe = _redis().pipeline(transaction=True)
        pipe.delete(_seq_key(run_id))
        pipe.set(_text_key(run_id), b"", ex=settings.CHAT_RUN_STREAM_TTL_SECONDS)
        pipe.execute()
    except redis.RedisError:
        logger.warning("run stream reset failed", extra={"run_id": run_id})


# Counts the event and appends its text in one step. The text is appended only while the run's text key exists:
# it is created empty when the run is admitted and deleted when the run ends, so a delta that arrives after the
# end (another process's sender can still hold one) cannot bring the answer's text back into Redis.
_NEXT_SEQ_SCRIPT = """
local seq = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
if ARGV[2] ~= '' and redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('APPEND', KEYS[2], ARGV[2])
    redis.call('EXPIRE', KEYS[2], ARGV[1])
end
return seq
"""


def _next_seq(run_id: int, append_text: str | None = None) -> int:
    keys = [_seq_key(run_id), _text_key(run_id)]
    ttl = settings.CHAT_RUN_STREAM_TTL_SECONDS
    return int(_redis().eval(_NEXT_SEQ_SCRIPT, 2, *keys, ttl, (append_text or "").encode()))


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


_epoch_cache: tuple[float, str] | None = None


def _epoch() -> str:
    """The hub epoch, re-read at most every 2 s (it changes only when Redis lost its memory)."""
    global _epoch_cache
    now = time.monotonic()
    if _epoch_cache is None or now - _epoch_cache[0] > 2.0:
        _epoch_cache = (now, hub_epoch())
    return _epoch_cache[1]


def send_run_event_now(*, workflow_id: int, run_id: int, event: dict, append_text: str | None = None) -> None:
    """Send now (in order, from the sender thread), taking the run's next seq when the event goes out."""

    def build():
        try:
            seq = _next_seq(run_id, append_text)
        except redis.RedisError:
            logger.warning("run event seq failed", extra={"run_id": run_id, "event_type": event.get("type")})
            return None
        return workflow_id, {**event, "run_id": run_id, "seq": seq, "hub_epoch": _epoch()}

    sender.submit(build)


def publish_run_event(*, workflow_id: int, run_id: int, event: dict) -> None:
    """Send a run event once the current transaction commits (a rolled-back change never announces itself)."""
    transaction.on_commit(lambda: send_run_event_now(workflow_id=workflow_id, run_id=run_id, event=event))


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
    """Drop a run's streamed text (its reply is saved); the seq counter stays so late events keep counting. A delta
    still on its way (this process's sender or another's) finds no key and appends nothing (`_NEXT_SEQ_SCRIPT`)."""
    try:
        _redis().delete(_text_key(run_id))
    except redis.RedisError:
        logger.warning("run stream forget failed", extra={"run_id": run_id})


class DeltaBatcher:
    """Batches an answer's text deltas: a delta goes out at once when nothing of this answer is on its way;
    deltas arriving meanwhile ride the next event together. So the first text is never held back, and a fast
    stream costs a few events, not one per token."""

    def __init__(self, *, workflow_id: int, run_id: int):
        self.workflow_id = workflow_id
        self.run_id = run_id
        self._buffer: list[str] = []
        self._lock = threading.Lock()
        self._scheduled = False

    def add(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._buffer.append(text)
            if self._scheduled:
                return
            self._scheduled = True
        sender.submit(self._build)

    def _build(self):
        with self._lock:
            text = "".join(self._buffer)
            self._buffer.clear()
            self._scheduled = False
        if not text:
            return None
        try:
            seq = _next_seq(self.run_id, text)
        except redis.RedisError:
            logger.warning("delta seq failed", extra={"run_id": self.run_id})
            return None
        return self.workflow_id, {
            "type": "run.delta",
            "workflow_id": self.workflow_id,
            "text": text,
            "run_id": self.run_id,
            "seq": seq,
            "hub_epoch": _epoch(),
        }

    def flush(self) -> None:
        """Nothing to wait for: a batch is always already queued behind whatever is on its way."""
