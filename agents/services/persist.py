"""Step 3, `agent.persist_turn`: under the firing's lock, bill the answer, save `[...sent, assistant]`
(docs/invariants.md#save-after-call), run the tool calls in order, and continue with step n+1 or end the firing."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from agents import observers
from agents.dispatch import continue_step
from agents.locks import firing_and_step_for_update
from agents.models import Firing, LlmStep, ToolCallResult
from agents.rows import update_fields
from agents.services.firings import (
    firing_end,
    firing_key,
    firing_mark_changed,
    firing_save_changes,
    firing_write_along,
)
from agents.services.messages import firing_append, firing_messages, firing_messages_rewrite
from agents.services.runtime_runs import runtime_binding_record
from agents.tools import (
    ToolOutcome,
    run_tool,
    unknown_tool_outcome,
)
from agents.usage import llm_usage_statements, record_llm_usage
from conversations import store
from conversations.selectors import owner_tool_result_max_chars

from .approvals import (
    approval_request,
    approvals_cancel_pending,
    approvals_of,
    asks_first,
    declined_outcome,
    firing_park,
    firing_unpark,
)
from .compaction import compaction_request, pressure_record_after_turn
from .delegation import teammate_delegate
from .remote_tools import remote_calls, remote_calls_pending, remote_tool_calls_run

STOPPED_TOOL_TEXT = "Not run: the owner stopped this answer."
MAX_REMOTE_PASSES = 64

logger = logging.getLogger("agents.step")


def persist_turn(firing_id: str, iteration: int) -> None:
    # Remote tool calls (an MCP server's) cannot be made under the firing's lock: when the turn has one still to make,
    # the locked pass writes nothing, the calls are made outside it, and the turn is saved in a second pass. A pass
    # per call at most; a call running in another worker ends this delivery (that worker continues the turn).
    for _ in range(MAX_REMOTE_PASSES):
        if not _persist_pass(firing_id, iteration):
            return
        if not remote_tool_calls_run(firing_id, iteration):
            return
    logger.warning("persist gave up waiting for remote calls", extra={"firing_id": firing_id, "iteration": iteration})


def _persist_pass(firing_id: str, iteration: int) -> bool:
    """One locked pass; True when remote calls must be made before the turn can be saved (nothing was written)."""
    with transaction.atomic():
        locked = firing_and_step_for_update(firing_id, iteration)
        if locked is None:
            return False
        firing, step = locked
        if firing.is_terminal:
            _bill_orphan_step(firing, step)  # ended meanwhile (a reset): the call still cost money
            return False
        if step.state == LlmStep.State.COMPLETED:
            if _remote_calls_wait(firing, step):
                return True
            _save_assistant_turn(firing, step)
        elif step.state != LlmStep.State.PERSISTED:
            return False  # failed or ambiguous: the firing was ended by whoever recorded that
        elif _tool_phase_done(firing, step):
            # A duplicate delivery after this step's commit (a redelivered message, a second teammate's end): the
            # results are in the list and the next step was started (or, lost, is found by the watchdog).
            return False
        elif firing.state == Firing.State.AWAITING_APPROVAL and _remote_calls_wait(firing, step):
            return True  # a call the owner approved goes to its server outside the lock, like any remote call
        _advance_tools(firing, step)
        firing_save_changes(firing)
        return False


def _remote_calls_wait(firing: Firing, step: LlmStep) -> bool:
    if not remote_calls(firing, step.result["message"]) or "observed" in step.result:
        return False  # no query for a turn without remote calls
    answered = {r.tool_call_id: r for r in ToolCallResult.objects.filter(firing=firing, iteration=step.iteration)}
    return remote_calls_pending(firing, step, answered, approvals_of(firing, step.iteration))


def _bill_orphan_step(firing: Firing, step: LlmStep) -> None:
    if step.state != LlmStep.State.COMPLETED:
        return
    usage = (step.result or {}).get("usage") or {}
    record_llm_usage(firing, idempotency_key=f"llm-step:{step.pk}", kind="llm", outcome="ok", usage=usage)
    step.state = LlmStep.State.PERSISTED
    update_fields(step, ["state"])


def _save_assistant_turn(firing: Firing, step: LlmStep) -> None:
    result = step.result
    assistant = result["message"]
    usage = result.get("usage") or {}
    firing.iteration = step.iteration
    firing.tokens_used += int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    # Billed and marked persisted with the firing's write at the end of this transaction (one round trip for all).
    firing_write_along(
        firing,
        llm_usage_statements(firing, idempotency_key=f"llm-step:{step.pk}", kind="llm", outcome="ok", usage=usage),
    )
    step.state = LlmStep.State.PERSISTED
    firing_write_along(
        firing,
        [("step_persisted", f"UPDATE {LlmStep._meta.db_table} SET state = %s WHERE id = %s", [step.state, step.pk])],
    )
    firing_mark_changed(firing, "iteration", "tokens_used")
    # The exact sent list plus the answer, after the provider call (docs/invariants.md#save-after-call).
    firing_append(firing, result.get("observed") or [assistant])
    runtime_binding_record(firing, step)  # agent runtimes: the session this conversation continues in
    if firing.uses_conversation and _tool_calls(assistant):  # more steps follow: keep the conversation ours
        store.renew_firing_lease(
            firing_key(firing), owner_token=firing.lease_token, ttl_seconds=settings.FIRING_LEASE_TTL_SECONDS
        )


def _tool_phase_done(firing: Firing, step: LlmStep) -> bool:
    """Whether this persisted step's tool results were already added to the firing's list (until they are, a
    teammate it waits for or a retry after a rollback brings persist back here)."""
    if firing.state != Firing.State.RUNNING or firing.iteration != step.iteration:
        return firing.iteration > step.iteration
    return firing.results_iteration >= step.iteration


def _tool_calls(message: dict) -> list[dict]:
    return [b for b in message.get("blocks", []) if b.get("type") == "tool_call"]


def _text(message: dict) -> str:
    return "".join(b.get("text", "") for b in message.get("blocks", []) if b.get("type") == "text")


def _advance_tools(firing: Firing, step: LlmStep) -> None:
    """Answer the turn's tool calls in order; re-entrant, so a retry or a teammate's return continues here."""
    assistant = step.result["message"]
    # An agent runtime's run answered its own tool calls: they are in its observed messages, none is run here.
    calls = [] if "observed" in step.result else _tool_calls(assistant)
    stopped = firing.stop_requested or step.result.get("stop_reason") == "stopped"
    answered = (
        {r.tool_call_id: r for r in ToolCallResult.objects.filter(firing=firing, iteration=step.iteration)}
        if calls
        else {}
    )
    bindings = {b["name"]: b for b in firing.tool_bindings}
    approvals = approvals_of(firing, step.iteration) if calls else {}
    waiting = 0  # calls that wait for the owner's decision: the others are answered meanwhile
    cap = None  # the owner's tool-result cap, read once when a tool answers
    for call in calls:
        if call["id"] in answered:
            continue
        binding = bindings.get(call.get("name"))
        approval = None
        if not stopped and asks_first(binding, call):
            approval = approvals.get(call["id"]) or approval_request(firing, step.iteration, call, binding)
            if approval.state == approval.State.PENDING:
                waiting += 1
                continue
        if stopped:
            outcome = ToolOutcome(STOPPED_TOOL_TEXT, is_error=True)
        elif approval is not None and declined_outcome(approval) is not None:
            outcome = declined_outcome(approval)
        else:
            if binding is None:
                outcome = unknown_tool_outcome(call.get("name", ""), list(bindings))
            elif binding["is_teammate"]:
                outcome = teammate_delegate(firing, step, call, binding)
                if outcome is None:
                    return  # the teammate is working; its end brings us back here
            else:
                if firing.chat_run_id:
                    observers.notify_tool_step(firing=firing, tool_call=call, phase="started")
                outcome = run_tool(firing=firing, binding=binding, call=call)
                if cap is None:
                    cap = owner_tool_result_max_chars(firing.workflow.owner_id)
                outcome = ToolOutcome(store.cap_tool_result(outcome.content, cap), outcome.is_error)
        answered[call["id"]] = ToolCallResult.objects.create(
            firing=firing,
            iteration=step.iteration,
            tool_call_id=call["id"],
            name=call.get("name", ""),
            content=outcome.content,
            is_error=outcome.is_error,
        )
        if firing.chat_run_id:
            observers.notify_tool_step(
                firing=firing, tool_call=call, phase="finished", result={"is_error": outcome.is_error}
            )
    if stopped and any(a.state == a.State.PENDING for a in approvals.values()):
        approvals_cancel_pending(firing)
    if waiting:
        firing_park(firing)  # until every call of this step is decided; the decisions send persist again
        return
    if firing.state == Firing.State.AWAITING_APPROVAL and not firing_unpark(firing, step.iteration, stopped=stopped):
        return  # another firing holds the conversation's lease: the watchdog sends persist again
    results = [
        {
            "role": "tool",
            "blocks": [
                {
                    "type": "tool_result",
                    "tool_call_id": call["id"],
                    "name": call.get("name", ""),
                    "content": answered[call["id"]].content,
                    "is_error": answered[call["id"]].is_error,
                }
            ],
        }
        for call in calls
    ]
    firing.results_iteration = step.iteration
    firing_mark_changed(firing, "results_iteration")
    if results:
        firing.state = Firing.State.RUNNING
        firing_mark_changed(firing, "state")
        firing_append(firing, results, context=[assistant])
        _clear_old_tool_results(firing)
    _after_turn(firing, step, results=results, stopped=stopped)


def _clear_old_tool_results(firing: Firing) -> None:
    """Past the stored conversation's tool-result budget, turn the oldest results of earlier turns into placeholders
    (docs/invariants.md#old-results-cleared). Checked when a turn's results are saved and the stored size (known from
    the save, no read) is over the budget; the rewrite goes down to half the budget, so it happens once per half a
    budget of new results, not every turn."""
    prefix = firing.stored_prefix or {}
    size = prefix.get("size_bytes")
    if "length" not in prefix or size is None or size <= settings.CONVERSATION_TOOL_RESULT_BUDGET_BYTES:
        return
    sizes = store.clearable_result_sizes(firing_key(firing), store.StoredPrefix.from_dict(prefix))
    if sizes is None:
        return  # no result of an earlier turn left to clear: decided from the rows' columns, nothing loaded
    try:
        messages = firing_messages(firing)
    except (store.ConversationConflict, store.ConversationLoadFailed, store.ConversationTooLarge):
        return
    teammates = {b["name"] for b in firing.tool_bindings if b["is_teammate"]}
    cleared = store.clear_old_tool_results(messages, teammate_tools=teammates, sizes=sizes)
    if len(cleared) == len(messages) and all(a is b for a, b in zip(cleared, messages, strict=True)):
        return  # nothing of earlier turns left to clear
    firing_messages_rewrite(firing, cleared)


def firing_end_for_limit(firing: Firing, limit: str) -> None:
    """End a firing that reached a limit, the reason marked on its last answer (a rewrite of that answer and what
    follows it: rare, once per firing)."""
    try:
        messages = list(firing_messages(firing))
    except (store.ConversationConflict, store.ConversationLoadFailed, store.ConversationTooLarge):
        messages = []
    last_text = ""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            # A new dict: a message loaded from the store is read-only (providers/readonly.py).
            messages[index] = {**messages[index], "meta": {**(messages[index].get("meta") or {}), "end_reason": limit}}
            last_text = _text(messages[index])
            firing_messages_rewrite(firing, messages)
            break
    firing_end(firing, state=Firing.State.FINISHED, end_reason=limit, final_text=last_text)


def _after_turn(firing: Firing, step: LlmStep, *, results: list[dict], stopped: bool) -> None:
    assistant = step.result["message"]
    had_tool_calls = bool(results)
    compaction_is_due = pressure_record_after_turn(firing, step, added_messages=[assistant, *results])
    continues = not stopped and had_tool_calls and step.iteration < firing.agent_config["max_iterations"]
    if continues:
        # Compact before the next request, and continue from the compacted list: a summarizer failure then ends
        # this firing (docs/invariants.md#compaction), and the next save cannot undo the compaction. Until then no
        # execute_llm_step of this firing runs (a watchdog's or a duplicate's). A compaction already running (one
        # per conversation) is waited for instead of a second one.
        if compaction_is_due and compaction_request(firing, next_iteration=step.iteration + 1) != "none":
            return
        continue_step("agent.execute_llm_step", str(firing.pk), step.iteration + 1, firing=firing)
        return
    if stopped:
        firing_end(firing, state=Firing.State.STOPPED, end_reason="stopped", final_text=_text(assistant))
    elif not had_tool_calls:
        firing_end(firing, state=Firing.State.FINISHED, end_reason="answered", final_text=_text(assistant))
    else:
        firing_end_for_limit(firing, "max_iterations")
    if compaction_is_due:  # runs beside the next turns, and lands on whatever they append
        compaction_request(firing)
