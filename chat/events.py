"""Run events on the workflow's socket (docs/architecture.md#run-events, #realtime-events): every event of a run
carries a `seq` per run and the hub epoch.

The seq counter and the text streamed so far live in Redis, next to the channel layer: a delta batch appends its
text and takes its seq in one MULTI, so a snapshot (text so far + seq) read in one MULTI is exactly consistent with
the deltas that follow it. When Redis loses its memory the hub epoch changes too (core/hub.py), so a client
comparing epochs never trusts a counter that restarted. Only deltas carry content (the answer's text); every other
event is metadata (ids, states, counts, tool names).

Nothing is dropped quietly. An event that cannot take its seq (Redis unreachable) is tried again with backoff; a
delta batch keeps its text meanwhile and sends it with the next batch. An event given up on leaves a gap in the
run's seq (the next event skips a number), and a page that sees a gap refetches the snapshot. A run whose streamed
text Redis lost (restarted empty) gets it back from the process streaming it: that process's batcher holds all it
sent, and re-seeds the text key before appending (the `ended` marker tells a lost key from an ended run's).
"""

from __future__ import annotations

import logging
import os
import threading
import time

import redis
from django.conf import settings
from django.db import transaction

from core.hub import hub_epoch
from core.realtime import send_workflow_event_now, sender

logger = logging.getLogger("chat.events")

_client_lock = threading.Lock()
_client: tuple[int, redis.Redis] | None = None


def _redis() -> redis.Redis:
    global _client
    pid = os.getpid()
    with _client_lock:
        if _client is None or _client[0] != pid:  # a forked worker must not share its parent's sockets
            # Timeouts: these calls run on the process's one sender loop, which a hung Redis must not stall.
            _client = (
                pid,
                redis.Redis.from_url(
                    settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=settings.REDIS_SOCKET_TIMEOUT_SECONDS
                ),
            )
        return _client[1]


def _seq_key(run_id: int) -> str:
    return f"opencompany:chat:run:{int(run_id)}:seq"


def _text_key(run_id: int) -> str:
    return f"opencompany:chat:run:{int(run_id)}:text"


def _ended_key(run_id: int) -> str:
    return f"opencompany:chat:run:{int(run_id)}:ended"


def reset_run_stream(run_id: int) -> None:
    """A new run starts its counter at zero (ids of a recreated test database repeat) and an empty streamed text.
    Called before the run's admission commits, so no event of the run can have been counted yet; harmless if the
    admission rolls back (an empty key that expires)."""
    try:
        pipe = _redis().pipeline(transaction=True)
        pipe.delete(_seq_key(run_id), _ended_key(run_id))
        pipe.set(_text_key(run_id), b"", ex=settings.CHAT_RUN_STREAM_TTL_SECONDS)
        pipe.execute()
    except redis.RedisError:
        logger.warning("run stream reset failed", extra={"run_id": run_id})


# Counts the event and appends its text in one step. The text is appended only while the run's text key exists:
# it is created empty when the run is admitted and deleted when the run ends (leaving the `ended` marker), so a
# delta that arrives after the end (another process's sender can still hold one) cannot bring the answer's text
# back into Redis. A text key missing without the marker means Redis lost the run's stream: a delta is then refused
# (-1) unless it brings the text streamed before it (ARGV[4] = '1', ARGV[5] = that text), which re-seeds the key.
# ARGV[3] is the step: 1, or more when events of this run were given up on, so the page sees the gap.
_NEXT_SEQ_SCRIPT = """
local has_text = redis.call('EXISTS', KEYS[2]) == 1
if not has_text and redis.call('EXISTS', KEYS[3]) == 0 then
    if ARGV[4] == '1' then
        redis.call('SET', KEYS[2], ARGV[5], 'EX', ARGV[1])
        has_text = true
    elseif ARGV[2] ~= '' then
        return -1
    end
end
local seq = redis.call('INCRBY', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[1])
if ARGV[2] ~= '' and has_text then
    redis.call('APPEND', KEYS[2], ARGV[2])
    redis.call('EXPIRE', KEYS[2], ARGV[1])
end
return seq
"""

STREAM_LOST = -1


def _next_seq(run_id: int, append_text: str | None = None, *, step: int = 1, seed: str | None = None) -> int:
    """The run's next seq (and its text appended), or STREAM_LOST for a delta whose run's stream Redis lost and
    that brought no `seed` to rebuild it with."""
    keys = [_seq_key(run_id), _text_key(run_id), _ended_key(run_id)]
    ttl = settings.CHAT_RUN_STREAM_TTL_SECONDS
    args = [ttl, (append_text or "").encode(), int(step), "1" if seed is not None else "0", (seed or "").encode()]
    return int(_redis().eval(_NEXT_SEQ_SCRIPT, 3, *keys, *args))


FIRST_DELTA_KEY = "opencompany:metrics:chat-first-delta"


def _record_first_delta(run_id: int) -> None:
    """When a run's first text went out (a sorted set: run id scored by the time), for the first-delta latency in
    /metrics (core/metrics.py). NX: a later process streaming the same run keeps the first time. Entries
    older than an hour are dropped here, so the set stays small without a sweep."""
    now = time.time()
    try:
        pipe = _redis().pipeline(transaction=False)
        pipe.zadd(FIRST_DELTA_KEY, {str(int(run_id)): now}, nx=True)
        pipe.zremrangebyscore(FIRST_DELTA_KEY, "-inf", now - 3600)
        pipe.execute()
    except redis.RedisError:
        pass  # a metric, never worth an answer


def first_delta_times(since: float) -> dict[int, float]:
    """Run id -> when its first text went out (unix time), for runs whose first text went out after `since`."""
    try:
        pairs = _redis().zrangebyscore(FIRST_DELTA_KEY, since, "+inf", withscores=True)
    except redis.RedisError:
        return {}
    return {int(member): score for member, score in pairs}


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


def _forget_epoch() -> None:
    """Redis failed or lost a stream: the epoch may have changed, so the next event reads it afresh."""
    global _epoch_cache
    _epoch_cache = None


# Events given up on, per run, not yet shown as a gap. Only the sender loop's thread touches it (builds run there).
_missed: dict[int, int] = {}


def _take_seq(run_id: int, append_text: str | None = None, *, seed: str | None = None) -> int:
    # A re-seeding batch skips one number: a page that refetched its snapshot after Redis came back but before
    # this batch (empty text, seq 0) then sees a gap and refetches the re-seeded text instead of streaming on
    # without the beginning.
    step = 1 + _missed.get(run_id, 0) + (1 if seed is not None else 0)
    seq = _next_seq(run_id, append_text, step=step, seed=seed)
    if seq != STREAM_LOST:
        _missed.pop(run_id, None)
    return seq


def _give_up(run_id: int, what: str) -> None:
    _missed[run_id] = _missed.get(run_id, 0) + 1
    while len(_missed) > 10_000:  # runs whose next event never came
        _missed.pop(next(iter(_missed)))
    logger.warning("run event given up", extra={"run_id": run_id, "event_type": what})


def _retry_delay(attempt: int) -> float:
    return min(2.0, 0.1 * 2**attempt)


def send_run_event_now(*, workflow_id: int, run_id: int, event: dict, append_text: str | None = None) -> None:
    """Send now (in order, from the sender thread), taking the run's next seq when the event goes out. Redis
    unreachable: tried again with backoff for CHAT_EVENT_RETRY_SECONDS, then given up (a gap in the seq)."""
    deadline = time.monotonic() + settings.CHAT_EVENT_RETRY_SECONDS

    def build(attempt=0):
        try:
            seq = _take_seq(run_id, append_text)
        except redis.RedisError:
            _forget_epoch()
            if time.monotonic() < deadline:
                if attempt == 0:
                    logger.warning("run event seq failed, retrying", extra={"run_id": run_id})
                sender.submit_later(_retry_delay(attempt), lambda: build(attempt + 1))
            else:
                _give_up(run_id, str(event.get("type")))
            return None
        return workflow_id, {**event, "run_id": run_id, "seq": seq, "hub_epoch": _epoch()}

    sender.submit(build)


# --- typed constructors: one per event the chat sends (metadata only; the text goes as deltas) -------------------


def run_started_event(*, workflow_id: int, kind: str, state: str, user_message_id: int) -> dict:
    return {
        "type": "run.started",
        "workflow_id": workflow_id,
        "kind": kind,
        "state": state,
        "user_message_id": user_message_id,
    }


def run_stopping_event(*, workflow_id: int, state: str) -> dict:
    return {"type": "run.stopping", "workflow_id": workflow_id, "state": state}


def run_step_event(*, workflow_id: int, step, phase: str) -> dict:
    """A tool call of the run started or finished (`step`: its ChatRunStep row)."""
    return {
        "type": "run.step",
        "workflow_id": workflow_id,
        "step_id": step.pk,
        "phase": phase,
        "name": step.name,
        "agent_node_id": step.agent_node_id,
        "is_error": step.is_error,
    }


def run_ended_event(
    *, workflow_id: int, state: str, outcome: str, reply_message_id: int, status: str, revision: int, code: str = ""
) -> dict:
    """`run.finished` (answered or stopped) or `run.failed` (state `error`, with its `code`)."""
    event = {
        "type": "run.failed" if state == "error" else "run.finished",
        "workflow_id": workflow_id,
        "state": state,
        "outcome": outcome,
        "reply_message_id": reply_message_id,
        "status": status,
        "revision": revision,
    }
    if code:
        event["code"] = code
    return event


def chat_updated_event(*, workflow_id: int, revision: int, reason: str) -> dict:
    """The thread changed shape (a branch move, feedback, clear, reset): open pages refetch the snapshot. The hub
    epoch is added when it is sent."""
    return {"type": "chat.updated", "workflow_id": workflow_id, "revision": revision, "reason": reason}


def publish_run_event(*, workflow_id: int, run_id: int, event: dict) -> None:
    """Send a run event once the current transaction commits (a rolled-back change never announces itself)."""
    transaction.on_commit(lambda: send_run_event_now(workflow_id=workflow_id, run_id=run_id, event=event))


def publish_chat_updated(*, workflow_id: int, revision: int, reason: str) -> None:
    """Send `chat.updated` once the current transaction commits."""
    event = chat_updated_event(workflow_id=workflow_id, revision=revision, reason=reason)
    transaction.on_commit(
        lambda: send_workflow_event_now(workflow_id=workflow_id, event={**event, "hub_epoch": hub_epoch()})
    )


def forget_run_stream(run_id: int) -> None:
    """Drop a run's streamed text (its reply is saved); the seq counter stays so late events keep counting. A delta
    still on its way (this process's sender or another's) finds no key and appends nothing (`_NEXT_SEQ_SCRIPT`)."""
    try:
        pipe = _redis().pipeline(transaction=True)
        pipe.delete(_text_key(run_id))
        pipe.set(_ended_key(run_id), b"1", ex=settings.CHAT_RUN_STREAM_TTL_SECONDS)
        pipe.execute()
    except redis.RedisError:
        logger.warning("run stream forget failed", extra={"run_id": run_id})


class DeltaBatcher:
    """Batches an answer's text deltas: a delta goes out at once when nothing of this answer is on its way;
    deltas arriving meanwhile ride the next event together. So the first text is never held back, and a fast
    stream costs a few events, not one per token.

    A batch whose seq cannot be taken (Redis unreachable) keeps its text and is tried again with backoff; text
    arriving meanwhile joins it, so nothing streamed is lost while Redis blinks. The batcher also keeps all the text
    it sent: when Redis lost the run's stream, the next batch re-seeds it, and a page's snapshot has the text again.
    """

    def __init__(self, *, workflow_id: int, run_id: int):
        self.workflow_id = workflow_id
        self.run_id = run_id
        self._buffer: list[str] = []
        self._sent: list[str] = []  # only the sender thread touches it
        self._lock = threading.Lock()
        self._scheduled = False
        self._failing_since: float | None = None
        self._attempt = 0

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
        if not text:
            with self._lock:
                self._scheduled = bool(self._buffer)
            return None
        try:
            seq = _take_seq(self.run_id, text)
            if seq == STREAM_LOST:
                _forget_epoch()
                logger.warning("run stream lost by Redis, re-seeding", extra={"run_id": self.run_id})
                seq = _take_seq(self.run_id, text, seed="".join(self._sent))
        except redis.RedisError:
            _forget_epoch()
            self._retry_later(text)
            return None
        self._failing_since = None
        self._attempt = 0
        if not self._sent:
            _record_first_delta(self.run_id)
        self._sent.append(text)
        with self._lock:
            # Text that came while this batch was built goes out next, behind it (add() saw `_scheduled`).
            again = bool(self._buffer)
            self._scheduled = again
        if again:
            sender.submit(self._build)
        return self.workflow_id, {
            "type": "run.delta",
            "workflow_id": self.workflow_id,
            "text": text,
            "run_id": self.run_id,
            "seq": seq,
            "hub_epoch": _epoch(),
        }

    def _retry_later(self, text: str) -> None:
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
            logger.warning("delta seq failed, keeping the text and retrying", extra={"run_id": self.run_id})
        with self._lock:
            self._buffer.insert(0, text)  # before whatever arrived meanwhile
            if now - self._failing_since > settings.CHAT_EVENT_RETRY_SECONDS:
                # Stop the timer; the text waits in the buffer and the next delta tries again. An answer that
                # streams nothing more is saved whole anyway, and its end makes the page refetch.
                self._scheduled = False
                self._failing_since = None
                self._attempt = 0
                return
        self._attempt += 1
        sender.submit_later(_retry_delay(self._attempt), self._build)

    def flush(self) -> None:
        """Nothing to wait for: a batch is always already queued behind whatever is on its way."""
