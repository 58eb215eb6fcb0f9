"""How a firing's next step is started: a Celery task on commit, or the same function in-process.

`AGENT_EXECUTION_MODE = "celery"` (the product) sends `agent.*` tasks to the `agent` queue
once the transaction that scheduled them commits. `"inline"` (tests that say so, and the
offline demo when no worker runs) calls the same step functions in this process; steps
scheduled while a step runs are queued and run one after another, never nested, so an
inline firing behaves like the chained tasks and cannot recurse without bound.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from django.conf import settings
from django.db import transaction

_inline = threading.local()


def _step_functions() -> dict:
    from agents.services import steps

    return {
        "agent.prepare_payload": steps.prepare_payload,
        "agent.execute_llm_step": steps.execute_llm_step,
        "agent.persist_turn": steps.persist_turn,
        "agent.compact_context": steps.compact_context,
    }


def _drain_inline() -> None:
    if getattr(_inline, "draining", False):
        return
    _inline.draining = True
    try:
        functions = _step_functions()
        while _inline.queue:
            name, args = _inline.queue.popleft()
            functions[name](*args)
    finally:
        _inline.draining = False


def enqueue_step(task_name: str, *args, countdown: float | None = None) -> None:
    """Start `task_name(*args)` after commit. Arguments must be ids and keys only."""
    if settings.AGENT_EXECUTION_MODE == "inline":
        if not hasattr(_inline, "queue"):
            _inline.queue = deque()

        def run_inline():
            if countdown:
                time.sleep(countdown)  # only a busy conversation lease asks for this
            _inline.queue.append((task_name, args))
            _drain_inline()

        transaction.on_commit(run_inline)
        return

    from opencompany.celery import app

    def send():
        app.send_task(task_name, args=list(args), queue=settings.CELERY_QUEUE_AGENT, countdown=countdown)

    transaction.on_commit(send)
