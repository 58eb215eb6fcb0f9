"""A run's event stream in Redis (docs/architecture.md#run-events, #realtime-events): every event of a run
carries a `seq` per run and the hub epoch, taken here as the event goes out.

The seq counter and the text streamed so far live in Redis, next to the channel layer: a delta batch appends its
text and takes its seq in one MULTI, so a snapshot (text so far + seq) read in one MULTI is exactly consistent with
the deltas that follow it. When Redis loses its memory the hub epoch changes too (core/hub.py), so a client
comparing epochs never trusts a counter that restarted. Only deltas carry content (the answer's text); every other
event is metadata (ids, states, counts, tool names).

Nothing is dropped quietly. An event that cannot take its seq (Redis unreachable) is tried again with backoff; a
delta batch keeps its text meanwhile and sends it with the next batch (chat/delta_batcher.py). An event given up on
leaves a gap in the run's seq (the next event skips a number), and a page that sees a gap refetches the snapshot.
A run whose streamed text Redis lost (restarted empty) gets it back from the process streaming it: that process's
batcher holds all it sent, and re-seeds the text key before appending (the `ended` marker tells a lost key from an
ended run's).
"""

from __future__ import annotations

import logging
import os
import threading
import time

import redis
from django.conf import settings

from core.hub import hub_epoch
from core.realtime import sender

logger = logging.getLogger("chat.run_stream")

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


def record_first_delta(run_id: int) -> None:
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


_epoch_cache: tuple[float, str] | None = None


def stream_epoch() -> str:
    """The hub epoch, re-read at most every 2 s (it changes only when Redis lost its memory)."""
    global _epoch_cache
    now = time.monotonic()
    if _epoch_cache is None or now - _epoch_cache[0] > 2.0:
        _epoch_cache = (now, hub_epoch())
    return _epoch_cache[1]


def forget_stream_epoch() -> None:
    """Redis failed or lost a stream: the epoch may have changed, so the next event reads it afresh."""
    global _epoch_cache
    _epoch_cache = None


# Events given up on, per run, not yet shown as a gap. Only the sender loop's thread touches it (builds run there).
_missed: dict[int, int] = {}


def take_seq(run_id: int, append_text: str | None = None, *, seed: str | None = None) -> int:
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


def retry_delay(attempt: int) -> float:
    return min(2.0, 0.1 * 2**attempt)


def send_run_event_now(
    *, workflow_id: int, run_id: int, event: dict, append_text: str | None = None, wait: bool = False
) -> None:
    """Send now (in order, from the sender thread), taking the run's next seq when the event goes out. Redis
    unreachable: tried again with backoff for CHAT_EVENT_RETRY_SECONDS, then given up (a gap in the seq).

    `wait`: return only once the event went out (at most CHAT_RUN_STARTED_SEND_WAIT_SECONDS), for a run's first
    event, which is sent from the admitting process while the run's later events come from a worker."""
    deadline = time.monotonic() + settings.CHAT_EVENT_RETRY_SECONDS

    def build(attempt=0):
        try:
            seq = take_seq(run_id, append_text)
        except redis.RedisError:
            forget_stream_epoch()
            if time.monotonic() < deadline:
                if attempt == 0:
                    logger.warning("run event seq failed, retrying", extra={"run_id": run_id})
                sender.submit_later(retry_delay(attempt), lambda: build(attempt + 1))
            else:
                _give_up(run_id, str(event.get("type")))
            return None
        return workflow_id, {**event, "run_id": run_id, "seq": seq, "hub_epoch": stream_epoch()}

    if wait:
        sender.submit_and_wait(build, timeout=settings.CHAT_RUN_STARTED_SEND_WAIT_SECONDS)
    else:
        sender.submit(build)
