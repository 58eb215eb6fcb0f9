"""Remote tool calls (an MCP server's tools): made outside any transaction, each recorded `started` before it is made.

Persist finds a turn's remote calls under the firing's lock, leaves the lock, and runs them here in order; then it
takes the lock again and saves the turn with their results. A call is claimed by inserting its `ToolCallResult` as
`started` (one row per call, unique), so at most one worker ever sends it. A `started` row past its deadline (the
node's timeout plus MCP_CALL_LOST_GRACE_SECONDS) was lost with its worker: it becomes `ambiguous`, and the model is
told it is unknown whether the call ran. It is never sent again (docs/tools.md#never-re-sent).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, close_old_connections, transaction
from django.utils import timezone

from agents import observers
from agents.models import Firing, LlmStep, ToolCallResult
from agents.services.approvals import approvals_of, may_call
from agents.services.heartbeat import stop_checker, stop_requested
from agents.tools import run_remote_tool
from conversations import store
from conversations.selectors import owner_tool_result_max_chars

logger = logging.getLogger("agents.tools")

AMBIGUOUS_TEXT = (
    "Error: unknown whether this call ran. The worker making it was lost before the server answered, and a call "
    "that may have had effects is never sent again. Check whether it took effect before calling it again."
)


def remote_calls(firing: Firing, message: dict) -> list[tuple[dict, dict]]:
    """The (call, binding) pairs of a message's calls that go to a remote tool with readable arguments (a call with
    unreadable arguments is answered by persist without reaching any server)."""
    bindings = {b["name"]: b for b in firing.tool_bindings if b.get("remote")}
    if not bindings:
        return []
    return [
        (block, bindings[block.get("name")])
        for block in message.get("blocks", [])
        if block.get("type") == "tool_call"
        and block.get("name") in bindings
        and isinstance(block.get("arguments"), dict)
    ]


def remote_calls_pending(firing: Firing, step: LlmStep, answered: dict, approvals: dict) -> bool:
    """Whether a remote call of this step still has to be made (and Stop was not pressed; one that asks first only
    once approved), or is running (`started`) in some worker: persist must then leave the lock and let
    `remote_tool_calls_run` do it."""
    stopped = firing.stop_requested or (step.result or {}).get("stop_reason") == "stopped"
    for call, binding in remote_calls(firing, step.result["message"]):
        record = answered.get(call["id"])
        if record is None and not stopped and may_call(binding, call, approvals):
            return True
        if record is not None and record.state == ToolCallResult.State.STARTED:
            return True
    return False


def remote_tool_calls_run(firing_id, iteration: int) -> bool:
    """Make step `iteration`'s remote calls nobody made yet, in order, outside any transaction. False when one is
    running in another worker (whose answer continues the turn) or was just claimed by one: persist stops there."""
    firing = Firing.objects.select_related("workflow").filter(pk=firing_id).first()
    step = LlmStep.objects.filter(firing_id=firing_id, iteration=iteration).first()
    if firing is None or firing.is_terminal or step is None:
        return True
    # A parked firing's step was saved before it parked: its approved calls are made now.
    parked = firing.state == Firing.State.AWAITING_APPROVAL and step.state == LlmStep.State.PERSISTED
    if step.state != LlmStep.State.COMPLETED and not parked:
        return True
    calls = remote_calls(firing, step.result["message"])
    approvals = approvals_of(firing, iteration)
    records = {
        r.tool_call_id: r
        for r in ToolCallResult.objects.filter(firing_id=firing_id, tool_call_id__in=[c["id"] for c, _ in calls])
    }
    stopped = step.result.get("stop_reason") == "stopped"
    for call, binding in calls:
        record = records.get(call["id"])
        if record is None and not may_call(binding, call, approvals):
            continue  # waits for the owner's decision (or was declined): persist answers it
        if record is None:
            if stopped or stop_requested(firing_id):
                return True  # persist answers this call and the rest "not run"
            record = _claim(firing, iteration, call, binding)
            if record is None:
                return False
            _make(firing, record, call, binding)
        elif record.state == ToolCallResult.State.STARTED:
            if record.deadline_at and record.deadline_at > timezone.now():
                return False
            _mark_ambiguous(record)
    return True


def _claim(firing: Firing, iteration: int, call: dict, binding: dict) -> ToolCallResult | None:
    """Record the call `started` (autocommit) before it is made; None when another worker recorded it first."""
    timeout = int(((binding.get("meta") or {}).get("server") or {}).get("timeout_seconds") or 60)
    deadline = timezone.now() + timedelta(seconds=timeout + settings.MCP_CALL_LOST_GRACE_SECONDS)
    try:
        with transaction.atomic():
            return ToolCallResult.objects.create(
                firing=firing,
                iteration=iteration,
                tool_call_id=call["id"],
                name=call.get("name", ""),
                state=ToolCallResult.State.STARTED,
                node_id=binding["node_id"],
                deadline_at=deadline,
            )
    except IntegrityError:
        return None


def _make(firing: Firing, record: ToolCallResult, call: dict, binding: dict) -> None:
    if firing.chat_run_id:
        observers.notify_tool_step(firing=firing, tool_call=call, phase="started")
    started = time.monotonic()
    outcome = run_remote_tool(firing=firing, binding=binding, call=call, should_stop=stop_checker(firing.pk))
    duration_ms = int((time.monotonic() - started) * 1000)
    if duration_ms >= settings.AGENT_STEP_HEARTBEAT_SECONDS * 1000:
        close_old_connections()  # idle through a long call: the server may have closed it meanwhile
    content = store.cap_tool_result(outcome.content, owner_tool_result_max_chars(firing.workflow.owner_id))
    saved = ToolCallResult.objects.filter(pk=record.pk, state=ToolCallResult.State.STARTED).update(
        state=ToolCallResult.State.COMPLETED, content=content, is_error=outcome.is_error, duration_ms=duration_ms
    )
    if not saved:
        # Declared ambiguous meanwhile (this worker was taken for lost): that record stands, the answer is dropped.
        logger.warning("late tool answer dropped", extra={"firing_id": str(firing.pk), "tool": record.name})
        return
    if firing.chat_run_id:
        observers.notify_tool_step(
            firing=firing, tool_call=call, phase="finished", result={"is_error": outcome.is_error}
        )


def _mark_ambiguous(record: ToolCallResult) -> None:
    ToolCallResult.objects.filter(pk=record.pk, state=ToolCallResult.State.STARTED).update(
        state=ToolCallResult.State.AMBIGUOUS, content=AMBIGUOUS_TEXT, is_error=True
    )
