"""What runs beside a provider call: the step's heartbeat, the Stop check, and saving the answer through a database
blip.

A provider call is the one thing in a step that cannot be redone (one attempt, never retried), so nothing around it
may turn a passing database error into a lost answer: a failed heartbeat write is retried at the next beat, a failed
Stop check means "not known yet" (never "stop"), and the answer's save is retried until the database is back or the
firing's deadline passes.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError, connection, connections
from django.utils import timezone

from agents.models import Firing, LlmStep
from conversations import store

logger = logging.getLogger("agents.step")

T = TypeVar("T")

_BACKOFF_FIRST_SECONDS = 0.2
_BACKOFF_MAX_SECONDS = 5.0


def _drop_broken_connection() -> None:
    # The next query opens a fresh connection; a broken one would fail every query after the first error.
    try:
        connection.close()
    except DatabaseError:
        pass


def touch_step(step_id: int) -> None:
    LlmStep.objects.filter(pk=step_id, state=LlmStep.State.STARTED).update(heartbeat_at=timezone.now())


def touch_compacting_firing(firing_id) -> None:
    Firing.objects.filter(pk=firing_id, state=Firing.State.RUNNING, compaction_pending=True).update(
        updated_at=timezone.now()
    )


class _Beater:
    """One thread per process touches the row of every piece of work running in it that the watchdog must not take
    for lost: a step's provider call (its `heartbeat_at`), a firing's compaction (the firing's `updated_at`).

    A thread per call cost every step a thread start and a join around the call, each a wait for the scheduler
    (on a busy machine a good part of a fast turn), for a beat that a call shorter than the interval never makes.
    Each beat is on its own: a row whose write fails (the database restarting) is logged once per outage and
    tried again at the next beat, so one error never silences live work. Between rounds the thread hands its
    database connection back (it holds none while idle)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._beats: dict[tuple, list] = {}  # key -> [touch, its last beat failed]
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, key: tuple, touch: Callable[[], None]) -> None:
        with self._lock:
            self._beats[key] = [touch, False]
            # A forked worker child inherits the object but not the thread.
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, daemon=True, name="step-heartbeat")
                self._thread.start()

    def remove(self, key: tuple) -> None:
        with self._lock:
            self._beats.pop(key, None)

    def _run(self) -> None:
        while True:
            time.sleep(settings.AGENT_STEP_HEARTBEAT_SECONDS)
            with self._lock:
                due = [(key, beat[0]) for key, beat in self._beats.items()]
            for key, touch in due:
                self._beat(key, touch)
            if due:
                _drop_broken_connection()  # back to the pool until the next round

    def _beat(self, key: tuple, touch: Callable[[], None]) -> None:
        try:
            touch()
        except Exception:  # noqa: BLE001 (a beat that failed is tried again; the thread must not end)
            with self._lock:
                beat = self._beats.get(key)
                if beat is None:
                    return  # the work ended meanwhile
                failing, beat[1] = beat[1], True
            if not failing:
                logger.warning("heartbeat failed; retrying", extra={"beat": f"{key[0]}:{key[1]}"})
            _drop_broken_connection()
            return
        with self._lock:
            beat = self._beats.get(key)
            failing = bool(beat and beat[1])
            if failing:
                beat[1] = False
        if failing:
            logger.info("heartbeat recovered", extra={"beat": f"{key[0]}:{key[1]}"})


_beater = _Beater()


class _Heartbeat:
    """Has the process's heartbeat thread (`_Beater`) call `touch` every AGENT_STEP_HEARTBEAT_SECONDS while the
    block runs."""

    def __init__(self, key: tuple, touch: Callable[[], None]):
        self.key, self.touch = key, touch

    def __enter__(self):
        _beater.add(self.key, self.touch)
        return self

    def __exit__(self, *exc):
        _beater.remove(self.key)


class StepHeartbeat(_Heartbeat):
    """Touches the step row while the provider call runs, so the watchdog can tell a dead worker from a slow model."""

    def __init__(self, step_id: int):
        super().__init__(("step", step_id), functools.partial(touch_step, step_id))


def touch_compaction(key) -> None:
    """The conversation's running compaction is alive: its slot, and the firing waiting for it (if one does)."""
    waiting = store.compaction_beat(key)
    if waiting is not None:
        touch_compacting_firing(waiting)


class CompactionHeartbeat(_Heartbeat):
    """Touches the conversation's compaction slot and the firing waiting for it while the summary runs (a provider
    call of any length), so a slot whose worker was lost can be claimed again and the watchdog can tell a
    compaction lost with its worker from a slow one (`watchdog._lost_compactions`)."""

    def __init__(self, key):
        super().__init__(("compaction", key), functools.partial(touch_compaction, key))


def stop_requested(firing_id) -> bool:
    return Firing.objects.filter(pk=firing_id, stop_requested=True).exists()


# Stop checks made while the database is down run here, off the streaming thread: each may wait for a connection
# (up to the pool's timeout) and the stream must not wait with it.
_offline_stop_checks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stop-check")


def _stop_requested_off_thread(firing_id) -> bool:
    try:
        return stop_requested(firing_id)
    except DatabaseError:
        _drop_broken_connection()
        raise
    finally:
        connections.close_all()  # the thread's connection goes back to the pool between checks


def stop_checker(firing_id) -> Callable[[], bool]:
    """A `should_stop` for the provider stream: polls the firing's Stop flag every AGENT_STOP_POLL_SECONDS.

    A database error is "not known", never "stop": the call goes on and the check backs off (up to 5 s) until the
    database answers again, logged once per outage. While it is down the checks run on a thread of their own and
    the stream never waits for one (each may wait seconds for a connection); the answer of such a check is taken at
    the first call after it came."""
    next_check = [time.monotonic() + settings.AGENT_STOP_POLL_SECONDS]  # the claim just read stop_requested
    stopped = [False]
    failures = [0]
    pending: list[Future | None] = [None]

    def failed(now: float) -> bool:
        if not failures[0]:
            logger.warning("stop check failed; the call goes on", extra={"firing_id": str(firing_id)})
        failures[0] += 1
        delay = min(_BACKOFF_FIRST_SECONDS * 2 ** (failures[0] - 1), _BACKOFF_MAX_SECONDS)
        next_check[0] = now + max(delay, settings.AGENT_STOP_POLL_SECONDS)
        return False

    def answered(now: float, value: bool) -> bool:
        stopped[0] = value
        failures[0] = 0
        next_check[0] = now + settings.AGENT_STOP_POLL_SECONDS
        return stopped[0]

    def should_stop() -> bool:
        if stopped[0]:
            return True
        now = time.monotonic()
        if pending[0] is not None:
            if not pending[0].done():
                return False
            future, pending[0] = pending[0], None
            try:
                return answered(now, future.result())
            except DatabaseError:
                return failed(now)
        if now < next_check[0]:
            return False
        if failures[0]:
            pending[0] = _offline_stop_checks.submit(_stop_requested_off_thread, firing_id)
            return False
        try:
            return answered(now, stop_requested(firing_id))
        except DatabaseError:
            _drop_broken_connection()
            return failed(now)

    return should_stop


def retry_on_database_error(action: Callable[[], T], *, deadline, what: str) -> T:
    """Run `action` (one autocommit statement) until it succeeds, backing off on database errors, up to `deadline`
    (a datetime; at least a minute from now), then raise the last error."""
    give_up = max(
        time.monotonic() + 60,
        time.monotonic() + (deadline - timezone.now()).total_seconds() if deadline else 0,
    )
    attempt = 0
    while True:
        try:
            return action()
        except DatabaseError:
            attempt += 1
            if time.monotonic() >= give_up:
                raise
            if attempt == 1:
                logger.warning("database unavailable while %s; retrying", what)
            _drop_broken_connection()
            time.sleep(min(_BACKOFF_FIRST_SECONDS * 2 ** (attempt - 1), _BACKOFF_MAX_SECONDS))
