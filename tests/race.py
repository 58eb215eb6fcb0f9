"""Races forced, not waited for: run the competing change at an exact point, and wait on facts, not on time.

- `run_before(target, action)` / `run_after(target, action)` patch the function named `target` (where its caller
  looks it up) so that `action(*args, **kwargs)` runs right before / after it, in the caller's thread, inside the
  caller's transaction. `once=True` (the default) runs it on the first call only. `signal_after(target, when=...)`
  yields an Event set once such a call has returned, for a test that waits on a step of another thread.
- `Competitor(fn)` runs `fn` in another thread with its own database connection (a second transaction), and
  records what it returned or raised; `competitor.result()` re-raises its error in the test.
- `waiting_on_a_lock(pid=...)` / `wait_until_waiting_on_a_lock(pid)` ask PostgreSQL whether a backend is blocked
  on a lock right now, so a test knows that the competing transaction reached its lock wait (instead of sleeping
  and hoping it did). `backend_pid()` is this thread's backend.
"""

from __future__ import annotations

import contextlib
import functools
import pkgutil
import threading
from unittest import mock

import psycopg
from django.db import connection, connections

from tests.processes import database_url_for_tests
from tests.waiting import wait_until

DEFAULT_TIMEOUT = 20.0


def _patched(target: str, action, *, before: bool, once: bool):
    original = pkgutil.resolve_name(target.rpartition(".")[0])  # the module (or class) that holds the name
    name = target.rpartition(".")[2]
    wrapped = getattr(original, name)
    fired = threading.Event()

    @functools.wraps(wrapped)
    def hook(*args, **kwargs):
        run = not (once and fired.is_set())
        fired.set()
        if run and before:
            action(*args, **kwargs)
        result = wrapped(*args, **kwargs)
        if run and not before:
            action(*args, **kwargs)
        return result

    return mock.patch(target, hook)


@contextlib.contextmanager
def run_before(target: str, action, *, once: bool = True):
    """Run `action` with the call's arguments just before `target` runs (in the same thread and transaction)."""
    with _patched(target, action, before=True, once=once):
        yield


@contextlib.contextmanager
def run_after(target: str, action, *, once: bool = True):
    """Run `action` with the call's arguments just after `target` returned (in the same thread and transaction)."""
    with _patched(target, action, before=False, once=once):
        yield


@contextlib.contextmanager
def signal_after(target: str, *, when=None):
    """Yield an Event that is set once `target` has returned from a call whose arguments satisfy `when(*args,
    **kwargs)` (any call when None), in whichever thread it ran: a test waits on it to know a step happened."""
    happened = threading.Event()

    def action(*args, **kwargs):
        if when is None or when(*args, **kwargs):
            happened.set()

    with run_after(target, action, once=False):
        yield happened


def backend_pid() -> int:
    """The PostgreSQL backend of this thread's Django connection."""
    connection.ensure_connection()
    return connection.connection.info.backend_pid


def waiting_on_a_lock(*, pid: int | None = None, query_like: str | None = None) -> bool:
    """Is the backend `pid` (or a statement matching `query_like`) blocked on a lock now? Asked from a new
    connection each time, because pg_stat_activity is a snapshot per transaction."""
    if pid is None and query_like is None:
        raise ValueError("name the backend (pid) or the statement (query_like) to look for")
    sql = "select count(*) from pg_stat_activity where wait_event_type = 'Lock'"
    params: list = []
    if pid is not None:
        sql += " and pid = %s"
        params.append(pid)
    if query_like is not None:
        sql += " and query ilike %s"
        params.append(query_like)
    with psycopg.connect(database_url_for_tests(), autocommit=True) as observer:
        return observer.execute(sql, params).fetchone()[0] > 0


def wait_until_waiting_on_a_lock(*, pid: int | None = None, query_like: str | None = None, **kwargs) -> None:
    what = f"backend {pid} to wait on a lock" if pid is not None else f"{query_like!r} to wait on a lock"
    kwargs.setdefault("timeout", DEFAULT_TIMEOUT)
    wait_until(lambda: waiting_on_a_lock(pid=pid, query_like=query_like), what=what, **kwargs)


class Competitor:
    """`fn()` in another thread, on its own database connection: the competing transaction of a race."""

    def __init__(self, fn, *, name: str = "competitor"):
        self._fn = fn
        self._done = threading.Event()
        self._value = None
        self._error: BaseException | None = None
        self.pid: int | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self.pid = backend_pid()
            self._started.set()
            self._value = self._fn()
        except BaseException as exc:  # handed to the test by result()
            self._error = exc
        finally:
            self._started.set()
            connections.close_all()
            self._done.set()

    def start(self) -> Competitor:
        self._thread.start()
        self._started.wait(DEFAULT_TIMEOUT)
        return self

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float = DEFAULT_TIMEOUT):
        if not self._done.wait(timeout):
            raise AssertionError(f"{self._thread.name} did not finish within {timeout}s")
        if self._error is not None:
            raise self._error
        return self._value
