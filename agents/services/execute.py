"""Step 2, `agent.execute_llm_step`: claim `LlmStep(firing, n)` and commit before one provider call (never retried),
with a heartbeat and Stop polling (`heartbeat.py`); store the answer on the step and continue with persist."""

from __future__ import annotations

import logging
import os
import socket
import time

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from agents import observers
from agents.dispatch import continue_step
from agents.locks import firing_for_update, llm_step_claim_if_firing_unchanged
from agents.models import Firing, LlmStep
from agents.rows import update_where
from agents.services.budget import refuse_step_over_budget, step_claim_budget_sql
from agents.services.firings import (
    firing_end,
    firing_save_changes,
)
from agents.services.heartbeat import StepHeartbeat, retry_on_database_error, stop_checker
from agents.services.messages import firing_messages
from agents.services.runtime_runs import runtime_run_attach
from agents.tools import (
    prepare_tool_calls,
)
from agents.usage import record_llm_usage
from conversations import store
from conversations.store import is_compaction_summary
from providers import ChatUnifier
from providers.attachments import attachments_of
from providers.errors import ProviderError

from .persist import firing_end_for_limit
from .provider_request import provider_request_of

logger = logging.getLogger("agents.step")


def _limit_reached(firing: Firing) -> str | None:
    config = firing.agent_config
    if firing.deadline_at and timezone.now() >= firing.deadline_at:
        return "max_wall_time"
    if firing.tokens_used >= config["max_tokens_per_firing"]:
        return "max_tokens"
    return None


def execute_llm_step(firing_id: str, iteration: int, *, committed: Firing | None = None) -> None:
    """One provider call for step `iteration`, claimed first. `committed`: the firing as the step before committed it.

    Run in the worker right after that commit, the claim is one statement conditional on the firing row still
    being where that step left it; anything else (a Stop, a reset, a limit, a duplicate, a message from the
    broker) takes the locked path, which reads the row and decides.
    """
    firing = committed
    claimed = _claim_step_if_unchanged(firing, iteration) if firing is not None and not _limit_reached(firing) else None
    if claimed is None:
        with transaction.atomic():
            firing = firing_for_update(firing_id, with_workflow=True)
            if firing is None or firing.state != Firing.State.RUNNING or firing.iteration != iteration - 1:
                return
            if firing.compaction_pending:
                return  # the compaction between steps continues the firing from the compacted list
            if firing.stop_requested:
                firing_end(firing, state=Firing.State.STOPPED, end_reason="stopped")
                return
            limit = _limit_reached(firing)
            if limit:
                firing_end_for_limit(firing, limit)
                firing_save_changes(firing)
                return
            # Recorded before the call, so a worker lost mid-call leaves a row the watchdog turns into `ambiguous`.
            claimed = _claim_step(firing, iteration)
            if claimed is None:
                return  # this iteration was already attempted: one attempt, never a second call
    step, limits_may_apply = claimed
    try:
        # Outside any transaction: the stored list comes from this process's copy or one read, never under a lock.
        messages = firing_messages(firing)
    except (store.ConversationConflict, store.ConversationLoadFailed, store.ConversationTooLarge) as exc:
        _fail_step(firing, step, exc, duration_ms=0, called=False)
        return
    # Spending limits (accounts.budget): no call once one is reached, counting what calls still running reserved;
    # this call reserves its estimate (from the messages it sends). The claim read whether any limit may apply.
    if refuse_step_over_budget(firing, step, messages=messages, limits_may_apply=limits_may_apply):
        return
    request_info = _request_info(firing, messages)
    on_event = None
    if firing.chat_run_id:
        chat_firing = firing

        def on_event(event: dict) -> None:
            observers.notify_stream_event(firing=chat_firing, event=event)

    started = time.monotonic()
    try:
        # Built inside: an owner key that cannot be decrypted fails the step with a clear error.
        request = provider_request_of(firing, messages)
        runtime_run_attach(firing, request)  # agent runtimes (agents/services/runtime_runs.py); no-op otherwise
        with StepHeartbeat(step.pk):
            result = ChatUnifier().chat(request, on_event=on_event, should_stop=stop_checker(firing.pk))
            duration_ms = int((time.monotonic() - started) * 1000)
            _refresh_connection_after(duration_ms)
            # One autocommit UPDATE: the answer is durable before persist_turn (a lost persist is re-sent by the
            # watchdog). A database that is down right now costs time, not the answer: it is retried (the heartbeat
            # goes on meanwhile, so the watchdog does not take the step for lost) until the firing's deadline.
            saved = retry_on_database_error(
                lambda: update_where(
                    LlmStep,
                    {"id": step.pk, "state": LlmStep.State.STARTED},
                    state=LlmStep.State.COMPLETED,
                    result={
                        "message": result.message,
                        "usage": result.usage.to_dict(),
                        "stop_reason": result.stop_reason,
                        "provider_ids": result.provider_ids,
                        # An agent runtime's whole run, its tool calls already answered (runtime_runs.py).
                        **({"observed": result.observed} if result.observed is not None else {}),
                    },
                    finished_at=timezone.now(),
                    duration_ms=duration_ms,
                    request_info=request_info,
                ),
                deadline=firing.deadline_at,
                what="saving a provider answer",
            )
    except ProviderError as exc:
        duration_ms = int((time.monotonic() - started) * 1000)
        _fail_step(firing, step, exc, duration_ms=duration_ms, called=True)
        return
    if not saved:
        # The watchdog declared this step ambiguous meanwhile; its record stands and the answer is dropped.
        logger.warning("late provider answer dropped", extra={"firing_id": firing_id, "step_id": step.pk})
        return
    prepare_tool_calls(firing=firing, message=result.message)  # outside any transaction
    continue_step("agent.persist_turn", firing_id, iteration)
    logger.info(
        "llm step done",
        extra={
            "firing_id": firing_id,
            "iteration": iteration,
            "provider": request.provider,
            "model": request.model,
            "duration_ms": duration_ms,
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
            "stop_reason": result.stop_reason,
        },
    )


def _claim_step(firing: Firing, iteration: int) -> tuple[LlmStep, bool] | None:
    """Insert `LlmStep(firing, iteration)` as started; None when that step was already claimed. With the step, whether
    a spending limit may apply (read by the same statement, `step_claim_budget_sql`).

    One statement (no savepoint): the unique (firing, iteration) index decides, and a loser is told by the empty
    RETURNING instead of an error.
    """
    now = timezone.now()
    step = LlmStep(firing=firing, iteration=iteration, worker=_worker_name(), started_at=now, heartbeat_at=now)
    budget_sql, budget_params = step_claim_budget_sql(firing)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {LlmStep._meta.db_table} "
            "(firing_id, iteration, state, worker, error_code, started_at, heartbeat_at) "
            "VALUES (%s, %s, %s, %s, '', %s, %s) ON CONFLICT (firing_id, iteration) DO NOTHING "
            f"RETURNING id, {budget_sql}",
            [firing.pk, iteration, LlmStep.State.STARTED, step.worker, now, now, *budget_params],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    step.pk = row[0]
    return step, row[1]


def _claim_step_if_unchanged(firing: Firing, iteration: int) -> tuple[LlmStep, bool] | None:
    """`_claim_step` in one statement, only while the firing row is as `firing` says (agents.locks).

    Running at iteration n-1 with no compaction pending, its message list, tools and limits can only have been
    written by the step that committed `firing`, so the request is built from that copy; `stop_requested` is read
    by the statement.
    """
    now = timezone.now()
    step = LlmStep(firing=firing, iteration=iteration, worker=_worker_name(), started_at=now, heartbeat_at=now)
    row = llm_step_claim_if_firing_unchanged(
        firing_id=firing.pk, iteration=iteration, worker=step.worker, now=now, also_return=step_claim_budget_sql(firing)
    )
    if row is None:
        return None
    step.pk = row[0]
    return step, row[1]


def _refresh_connection_after(duration_ms: int) -> None:
    # A connection left idle through a long provider call may have been closed by the server meanwhile: hand it
    # back and take a checked one. After a call shorter than a heartbeat interval it was just used by the claim.
    if duration_ms >= settings.AGENT_STEP_HEARTBEAT_SECONDS * 1000:
        close_old_connections()


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _fail_step(firing: Firing, step: LlmStep, exc, *, duration_ms: int, called: bool) -> None:
    """Fail the claimed step and end its firing saying why. `called`: the provider was called and refused (the call
    is billed, the firing's code is `provider_<code>`); otherwise the request could not be built (the stored list
    the firing extends is gone or unreadable), no call was made and nothing is billed."""
    _refresh_connection_after(duration_ms)
    with transaction.atomic():
        locked = firing_for_update(firing.pk)  # the firing before its step (docs/architecture.md#lock-order, 2)
        updated = LlmStep.objects.filter(pk=step.pk, state=LlmStep.State.STARTED).update(
            state=LlmStep.State.FAILED, error_code=exc.code, finished_at=timezone.now(), duration_ms=duration_ms
        )
        if not updated:
            return
        if called:
            record_llm_usage(firing, idempotency_key=f"llm-step:{step.pk}", kind="llm", outcome="error")
        error_code = f"provider_{exc.code}" if called else exc.code
        firing_end(locked, state=Firing.State.FAILED, error_code=error_code, error_message=exc.message)


def _request_info(firing: Firing, messages: list[dict]) -> dict:
    """Counts and names of what a request carried, for "what this answer was sent" (no message is copied, no file's
    bytes)."""
    prefix = firing.stored_prefix or {}
    return {
        "messages": len(messages),
        "stored_messages": int(prefix.get("length", 0)),
        "unsaved_messages": len(firing.pending_messages),
        "compaction_summary": any(is_compaction_summary(m) for m in messages[:2]),
        "tools": [binding["name"] for binding in firing.tool_bindings],
        # Name, media type and size of each attached file the request carried (never the bytes).
        "attachments": attachments_of(messages),
    }
