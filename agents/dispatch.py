"""How a firing's next step is started: in this worker right after the commit, as a Celery task, or in-process.

`AGENT_EXECUTION_MODE = "celery"` (the product) sends `agent.*` tasks to the `agent` queue
once the transaction that scheduled them commits (`enqueue_step`). A step that continues
the firing it just committed for (prepare -> execute 1, execute n -> persist n, persist n ->
execute n+1) is not sent when the worker is running an early-acknowledged task of that firing
(`running_steps`, see agents/tasks.py for why only those): `continue_step` runs it in the same
process right after the commit, saving a broker round trip per step. The step functions are
idempotent on their ids and claim their work in the database (`LlmStep(firing, n)` is inserted
before any provider call), so where a step runs does not change what it does; a continuation
lost with its process is found by the watchdog (`agents.services.watchdog`) and sent.

`"inline"` (tests that say so, and the offline demo when no worker runs) calls the same step
functions in this process; steps scheduled while a step runs are queued and run one after
another, never nested, so an inline firing behaves like the chained tasks and cannot recurse
without bound.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
import time
from collections import deque
from collections.abc import Callable

from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection, transaction

logger = logging.getLogger("agents.dispatch")

_inline = threading.local()
_chain = threading.local()

# Set by the worker's main process when a shutdown begins (`celery.signals.worker_shutting_down`). It lives in shared
# memory made at import, before the prefork pool forks, so the pool's children see it: a child busy with a firing
# then hands that firing's next steps to the broker instead of running them, and a warm shutdown waits for one
# step, not for whole firings (a stop grace that ran out would otherwise cut provider calls short).
_stopping = multiprocessing.RawValue("b", 0)


def worker_stopping() -> bool:
    return bool(_stopping.value)


def mark_worker_stopping(**_signal_kwargs) -> None:
    _stopping.value = 1


# Continuations whose Celery task retries on database errors: one that failed on one is handed to the broker, where
# that retry policy applies. `agent.execute_llm_step` is never handed on (one attempt; the watchdog finds a firing
# whose next step nobody claimed).
_RETRIED_ON_DATABASE_ERRORS = {"agent.persist_turn"}


# The runtime's step functions by task name, handed over at start-up by `AgentsConfig.ready()` (as observers and
# listeners are registered), so this module, which every step imports to schedule the next, imports no step.
_steps: dict[str, Callable] = {}


def register_steps(table: dict[str, Callable]) -> None:
    """Make `table` ({task name: step function}) what inline firings and in-worker continuations call."""
    _steps.update(table)


def step_function(task_name: str) -> Callable:
    """The step registered for `task_name` (a name nobody registered is a programming error)."""
    try:
        return _steps[task_name]
    except KeyError:
        raise LookupError(f"no step registered as {task_name!r} (AgentsConfig.ready registers them)") from None


def _drain_inline() -> None:
    if getattr(_inline, "draining", False):
        return
    _inline.draining = True
    try:
        while _inline.queue:
            name, args = _inline.queue.popleft()
            step_function(name)(*args)
    finally:
        _inline.draining = False


def _send(task_name: str, args: tuple, countdown: float | None = None) -> None:
    # The project's Celery app (opencompany/celery.py, loaded with the settings) is the current one in every process.
    current_app.send_task(task_name, args=list(args), queue=settings.CELERY_QUEUE_AGENT, countdown=countdown)


def enqueue_step(task_name: str, *args, countdown: float | None = None) -> None:
    """Start `task_name(*args)` after commit. Arguments must be ids and keys only."""
    if settings.AGENT_EXECUTION_MODE == "inline" or getattr(_inline, "forced", False):
        if not hasattr(_inline, "queue"):
            _inline.queue = deque()

        def run_inline():
            if countdown:
                time.sleep(countdown)  # only a busy conversation lease asks for this
            _inline.queue.append((task_name, args))
            _drain_inline()

        transaction.on_commit(run_inline)
        return

    transaction.on_commit(lambda: _send(task_name, args, countdown))


def continue_step(task_name: str, *args, firing=None) -> None:
    """Start the firing's next step after commit: in this worker when it is running a firing's steps, else sent.

    Only for the step that directly continues the work just committed for the same firing. Outside a worker's
    chain (a web process, the watchdog, a test calling a step function) it is `enqueue_step`. `firing` is the
    row as this transaction commits it: a step run here may start from it instead of reading it again (it never
    travels through the broker).
    """
    queue = getattr(_chain, "queue", None)
    if settings.AGENT_EXECUTION_MODE == "inline" or getattr(_inline, "forced", False) or queue is None:
        enqueue_step(task_name, *args)
        return

    def run_here_or_send():
        # A commit that comes after the chain stopped draining (a caller's outer transaction) is sent instead.
        if getattr(_chain, "queue", None) is queue:
            queue.append((task_name, args, firing))
        else:
            _send(task_name, args)

    transaction.on_commit(run_here_or_send)


@contextlib.contextmanager
def steps_in_this_thread():
    """Run every step scheduled inside the block, and the steps those schedule, in this thread before it ends.

    For a teammate asked from inside an agent runtime's run (agents/services/teammates.py): the CLI waits for the
    tool's answer on a thread of its own, so the teammate's firing cannot be parked and resumed like a native
    step's. Its steps run here, one after another, with their own transactions, and never inside a lock. Nesting is
    bounded by AGENT_MAX_DELEGATION_DEPTH. Whatever this thread was draining before is left as it was."""
    saved = {name: getattr(_inline, name) for name in ("queue", "draining", "forced") if hasattr(_inline, name)}
    _inline.queue, _inline.draining, _inline.forced = deque(), False, True
    try:
        yield
    finally:
        for name in ("queue", "draining", "forced"):
            if name in saved:
                setattr(_inline, name, saved[name])
            elif hasattr(_inline, name):
                delattr(_inline, name)


@contextlib.contextmanager
def running_steps():
    """Around a Celery task of a firing: after it returns, run the steps it continued to, one after another.

    A continuation that raises is logged and, when its task is retried on database errors, sent to the broker;
    it never fails the task that started the chain (that task's own work is committed).
    """
    if getattr(_chain, "queue", None) is not None:  # already draining in this thread
        yield
        return
    queue = _chain.queue = deque()
    try:
        yield
        while queue:
            name, args, firing = queue.popleft()
            if worker_stopping():
                _send(name, args)
                continue
            try:
                step_function(name)(*args, **({"committed": firing} if firing is not None else {}))
            except Exception as exc:
                logger.exception(
                    "continued step failed",
                    extra={"task": name, "step_args": list(args), "error_type": type(exc).__name__},
                )
                if not connection.in_atomic_block:
                    connection.close_if_unusable_or_obsolete()
                if isinstance(exc, DatabaseError) and name in _RETRIED_ON_DATABASE_ERRORS:
                    _send(name, args)
    finally:
        _chain.queue = None
        for name, args, _firing in queue:  # committed continuations the task's own failure left undrained
            _send(name, args)
