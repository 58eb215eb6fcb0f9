"""The text deltas of the answer being streamed, batched into `run.delta` events on the process's sender loop."""

from __future__ import annotations

import logging
import threading
import time

import redis
from django.conf import settings

from chat.run_stream import (
    STREAM_LOST,
    forget_stream_epoch,
    record_first_delta,
    retry_delay,
    stream_epoch,
    take_seq,
)
from core.realtime import sender

logger = logging.getLogger("chat.delta_batcher")


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
            seq = take_seq(self.run_id, text)
            if seq == STREAM_LOST:
                forget_stream_epoch()
                logger.warning("run stream lost by Redis, re-seeding", extra={"run_id": self.run_id})
                seq = take_seq(self.run_id, text, seed="".join(self._sent))
        except redis.RedisError:
            forget_stream_epoch()
            self._retry_later(text)
            return None
        self._failing_since = None
        self._attempt = 0
        if not self._sent:
            record_first_delta(self.run_id)
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
            "hub_epoch": stream_epoch(),
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
        sender.submit_later(retry_delay(self._attempt), self._build)

    def flush(self) -> None:
        """Nothing to wait for: a batch is always already queued behind whatever is on its way."""
