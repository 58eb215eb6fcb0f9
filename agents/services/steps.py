"""The four steps of a firing. Each runs as a Celery task (agents/tasks.py) or in-process.

    prepare_payload(firing_id)            resolve graph + tools, take the conversation lease, load + seed
    execute_llm_step(firing_id, n)        one provider call, recorded as started first, never retried
    persist_turn(firing_id, n)            save [...sent, assistant], usage, run the tools, chain step n+1
    compact_context(workflow_id, generation, agent_node_id)

Each is idempotent on its ids: a duplicate delivery finds the work done (or claimed) and
returns. No step waits on another: delegation parks the firing in `waiting` and the child's
end re-enqueues `persist_turn` of the parent.
"""

from __future__ import annotations

import logging
import time
import uuid

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from agents import observers
from agents.dispatch import continue_step, enqueue_step
from agents.models import Firing, LlmStep, ToolCallResult
from agents.services.budget import refuse_step_over_budget
from agents.services.firings import (
    end_firing,
    fire_agent,
    firing_deadline,
    firing_key,
    firing_mark_changed,
    firing_save_changes,
)
from agents.services.heartbeat import StepHeartbeat, retry_on_database_error, stop_checker
from agents.services.messages import firing_append, firing_messages, rewrite_firing_messages, seed_firing_messages
from agents.services.runtime_runs import runtime_binding_record, runtime_run_attach, summary_provider
from agents.services.teammates import delegation_refusal, teammate_outcome
from agents.tools import (
    ToolOutcome,
    ToolUnavailable,
    prepare_tool_calls,
    run_tool,
    tool_definition,
    unknown_tool_outcome,
)
from agents.usage import record_llm_usage
from agents.wiring import AgentNotFound, agent_wiring
from conversations.selectors import owner_tool_result_max_chars

logger = logging.getLogger("agents.step")

STOPPED_TOOL_TEXT = "Not run: the owner stopped this answer."


def _lock_firing(firing_id: str) -> Firing | None:
    """The firing row locked for a step, with its workflow's owner and ids (not the workflow's draft graph, which
    only a test run on generation 0 reads, and then loads on its own)."""
    locked = Firing.objects.select_for_update(of=("self",)).select_related("workflow")
    try:
        return locked.defer("workflow__graph", "workflow__node_numbers").get(pk=firing_id)
    except Firing.DoesNotExist:
        return None


# --- prepare ------------------------------------------------------------------------------


def _generation_graph(firing: Firing) -> dict:
    from opencompany.errors import NotFoundError
    from workflows.selectors import generation_graph

    try:
        return generation_graph(firing.workflow, firing.generation, normalize=False)
    except NotFoundError:
        return {}  # the agent is then not found, and the firing fails saying so


def _agent_config(node: dict) -> dict:
    params = node.get("params") or {}
    return {
        "name": params.get("name") or node["id"],
        "provider": params.get("provider") or "offline",
        "model": params.get("model") or "offline-echo",
        "system_prompt": params.get("system_prompt") or "",
        "temperature": params.get("temperature"),
        "max_output_tokens": params.get("max_output_tokens"),
        "thinking": params.get("thinking"),
        "max_iterations": params.get("max_iterations") or settings.AGENT_MAX_ITERATIONS,
        "max_wall_seconds": params.get("max_wall_seconds") or settings.AGENT_MAX_WALL_SECONDS,
        "max_tokens_per_firing": params.get("max_tokens_per_firing") or settings.AGENT_MAX_TOKENS_PER_FIRING,
        "compaction_threshold": params.get("compaction_threshold") or settings.AGENT_COMPACTION_THRESHOLD,
        "runtime_tools": params.get("runtime_tools") or [],  # agent runtimes: the built-in tools allowed
        "runtime_params": {k: params[k] for k in ("project", "location", "agent", "environment") if params.get(k)},
        "rlm": {k.removeprefix("rlm_"): v for k, v in params.items() if k.startswith("rlm_")},  # RLM's options
    }


def prepare_payload(firing_id: str) -> None:
    from conversations import store

    with transaction.atomic():
        firing = _lock_firing(firing_id)
        if firing is None or firing.state != Firing.State.QUEUED:
            return  # already prepared or ended: a duplicate delivery
        if firing.stop_requested:
            end_firing(firing, state=Firing.State.STOPPED, end_reason="stopped")
            return
        graph = _generation_graph(firing)
        try:
            wiring = agent_wiring(graph, firing.agent_node_id)
        except AgentNotFound as exc:
            end_firing(firing, state=Firing.State.FAILED, error_code="agent_not_found", error_message=str(exc))
            return
        config = _agent_config(wiring.node)
        uses_conversation = wiring.context_node_id is not None and firing.generation > 0
        key = firing_key(firing)
        if uses_conversation:
            token = firing.lease_token or uuid.uuid4().hex
            if not store.acquire_firing_lease(key, owner_token=token, ttl_seconds=settings.FIRING_LEASE_TTL_SECONDS):
                # Another firing of this conversation is mid-turn (SPEC §2 invariant 10): come back later
                # instead of blocking a worker. Touching the row tells the watchdog this firing is not lost.
                enqueue_step("agent.prepare_payload", str(firing.pk), countdown=settings.AGENT_LEASE_RETRY_SECONDS)
                firing.save(update_fields=["updated_at"])
                return
            firing.lease_token = token
        try:
            snapshot = store.load_conversation_snapshot(key) if uses_conversation else None
        except (store.ConversationLoadFailed, store.ConversationTooLarge) as exc:
            firing.uses_conversation = uses_conversation
            end_firing(firing, state=Firing.State.FAILED, error_code=exc.code, error_message=exc.message)
            return
        stored = store.close_unanswered_tool_calls(snapshot.messages) if snapshot else []
        contribution = observers.PrepareContribution()
        if firing.chat_run_id:
            contribution = observers.notify_prepared(firing=firing, stored_messages=stored)
        system_prompt = config["system_prompt"] + contribution.system_suffix
        user_prompt = contribution.user_prefix + firing.prompt
        firing.uses_conversation = uses_conversation
        seed_firing_messages(
            firing, snapshot=snapshot, repaired=stored, seeded=store.seed_request(system_prompt, stored, user_prompt)
        )
        firing.agent_config = config
        graph_nodes = {n["id"]: n for n in graph.get("nodes", [])}
        try:
            firing.tool_bindings = [_binding_with_definition(b.to_dict(), graph_nodes) for b in wiring.tools]
        except ToolUnavailable as exc:
            end_firing(firing, state=Firing.State.FAILED, error_code="tool_unavailable", error_message=str(exc))
            return
        firing.state = Firing.State.RUNNING
        firing.started_at = timezone.now()
        firing.deadline_at = firing_deadline(config["max_wall_seconds"])
        firing.save(
            update_fields=[
                "pending_messages",
                "stored_prefix",
                "agent_config",
                "tool_bindings",
                "uses_conversation",
                "lease_token",
                "state",
                "started_at",
                "deadline_at",
                "updated_at",
            ]
        )
        continue_step("agent.execute_llm_step", str(firing.pk), 1, firing=firing)
    logger.info("firing prepared", extra={"firing_id": firing_id, "stored_messages": len(stored)})


def _binding_with_definition(binding: dict, graph_nodes: dict) -> dict:
    definition = tool_definition(binding, graph_nodes)
    return {**binding, "description": definition.description, "parameters": definition.parameters}


# --- execute ------------------------------------------------------------------------------


def _limit_reached(firing: Firing) -> str | None:
    config = firing.agent_config
    if firing.deadline_at and timezone.now() >= firing.deadline_at:
        return "max_wall_time"
    if firing.tokens_used >= config["max_tokens_per_firing"]:
        return "max_tokens"
    return None


def _build_request(firing: Firing, messages: list[dict], *, credentials: bool = True):
    from provider_keys.selectors import owner_request_overrides
    from providers.types import ChatRequest, ChatSettings, ToolDefinition

    config = firing.agent_config
    # The owner's own key (and base URL) for this provider when they stored one, else the environment's.
    overrides = (
        owner_request_overrides(owner_id=firing.workflow.owner_id, provider=config["provider"]) if credentials else {}
    )
    return ChatRequest(
        provider=config["provider"],
        model=config["model"],
        messages=messages,
        tools=[ToolDefinition(b["name"], b["description"], b["parameters"]) for b in firing.tool_bindings],
        settings=ChatSettings(
            temperature=config.get("temperature"),
            max_output_tokens=config.get("max_output_tokens"),
            thinking=config.get("thinking"),
        ),
        **overrides,
    )


def execute_llm_step(firing_id: str, iteration: int, *, committed: Firing | None = None) -> None:
    """One provider call for step `iteration`, claimed first. `committed`: the firing as the step before committed it.

    Run in the worker right after that commit, the claim is one statement conditional on the firing row still
    being where that step left it; anything else (a Stop, a reset, a limit, a duplicate, a message from the
    broker) takes the locked path, which reads the row and decides.
    """
    from conversations import store
    from providers import ChatUnifier
    from providers.errors import ProviderError

    firing = committed
    step = _claim_step_if_unchanged(firing, iteration) if firing is not None and not _limit_reached(firing) else None
    if step is None:
        with transaction.atomic():
            firing = _lock_firing(firing_id)
            if firing is None or firing.state != Firing.State.RUNNING or firing.iteration != iteration - 1:
                return
            if firing.compaction_pending:
                return  # the compaction between steps continues the firing from the compacted list
            if firing.stop_requested:
                end_firing(firing, state=Firing.State.STOPPED, end_reason="stopped")
                return
            limit = _limit_reached(firing)
            if limit:
                _end_for_limit(firing, limit)
                firing_save_changes(firing)
                return
            # Recorded before the call, so a worker lost mid-call leaves a row the watchdog turns into `ambiguous`.
            step = _claim_step(firing, iteration)
            if step is None:
                return  # this iteration was already attempted: one attempt, never a second call
    if refuse_step_over_budget(firing, step):  # spending limits (accounts.budget): no call once one is reached
        return
    try:
        # Outside any transaction: the stored list comes from this process's copy or one read, never under a lock.
        messages = firing_messages(firing)
    except (store.ConversationConflict, store.ConversationLoadFailed, store.ConversationTooLarge) as exc:
        _record_unbuilt_step(firing, step, exc)
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
        request = _build_request(firing, messages)
        runtime_run_attach(firing, request)  # agent runtimes (agents/services/runtime_runs.py); no-op otherwise
        with StepHeartbeat(step.pk):
            result = ChatUnifier().chat(request, on_event=on_event, should_stop=stop_checker(firing.pk))
            duration_ms = int((time.monotonic() - started) * 1000)
            _refresh_connection_after(duration_ms)
            # One autocommit UPDATE: the answer is durable before persist_turn (a lost persist is re-sent by the
            # watchdog). A database that is down right now costs time, not the answer: it is retried (the heartbeat
            # goes on meanwhile, so the watchdog does not take the step for lost) until the firing's deadline.
            saved = retry_on_database_error(
                lambda: LlmStep.objects.filter(pk=step.pk, state=LlmStep.State.STARTED).update(
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
        _record_step_failure(firing, step, exc, duration_ms)
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


def _claim_step(firing: Firing, iteration: int) -> LlmStep | None:
    """Insert `LlmStep(firing, iteration)` as started; None when that step was already claimed.

    One statement (no savepoint): the unique (firing, iteration) index decides, and a loser is told by the empty
    RETURNING instead of an error.
    """
    now = timezone.now()
    step = LlmStep(firing=firing, iteration=iteration, worker=_worker_name(), started_at=now, heartbeat_at=now)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {LlmStep._meta.db_table} "
            "(firing_id, iteration, state, worker, error_code, started_at, heartbeat_at) "
            "VALUES (%s, %s, %s, %s, '', %s, %s) ON CONFLICT (firing_id, iteration) DO NOTHING RETURNING id",
            [firing.pk, iteration, LlmStep.State.STARTED, step.worker, now, now],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    step.pk = row[0]
    return step


def _claim_step_if_unchanged(firing: Firing, iteration: int) -> LlmStep | None:
    """`_claim_step` in one statement, only while the firing row is as `firing` says.

    The row is locked by the statement (a reset or Stop in progress is waited for and then seen). Running at
    iteration n-1 with no compaction pending, its message list, tools and limits can only have been written by
    the step that committed `firing`, so the request is built from that copy; `stop_requested` is read here.
    Still its own transaction, not autocommit: a claim waiting on a lock when its worker dies must not be
    committed by the orphaned backend once the lock frees (that would leave a step nobody calls for).
    """
    now = timezone.now()
    step = LlmStep(firing=firing, iteration=iteration, worker=_worker_name(), started_at=now, heartbeat_at=now)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {LlmStep._meta.db_table} "
            "(firing_id, iteration, state, worker, error_code, started_at, heartbeat_at) "
            f"SELECT id, %s, %s, %s, '', %s, %s FROM {Firing._meta.db_table} "
            "WHERE id = %s AND state = %s AND iteration = %s AND NOT compaction_pending AND NOT stop_requested "
            "FOR UPDATE ON CONFLICT (firing_id, iteration) DO NOTHING RETURNING id",
            [iteration, LlmStep.State.STARTED, step.worker, now, now, firing.pk, Firing.State.RUNNING, iteration - 1],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    step.pk = row[0]
    return step


def _refresh_connection_after(duration_ms: int) -> None:
    # A connection left idle through a long provider call may have been closed by the server meanwhile: hand it
    # back and take a checked one. After a call shorter than a heartbeat interval it was just used by the claim.
    if duration_ms >= settings.AGENT_STEP_HEARTBEAT_SECONDS * 1000:
        close_old_connections()


def _worker_name() -> str:
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


def _record_step_failure(firing: Firing, step: LlmStep, exc, duration_ms: int) -> None:
    _refresh_connection_after(duration_ms)
    with transaction.atomic():
        updated = LlmStep.objects.filter(pk=step.pk, state=LlmStep.State.STARTED).update(
            state=LlmStep.State.FAILED, error_code=exc.code, finished_at=timezone.now(), duration_ms=duration_ms
        )
        if not updated:
            return
        record_llm_usage(firing, idempotency_key=f"llm-step:{step.pk}", kind="llm", outcome="error")
        locked = Firing.objects.select_for_update().get(pk=firing.pk)
        end_firing(locked, state=Firing.State.FAILED, error_code=f"provider_{exc.code}", error_message=exc.message)


def _request_info(firing: Firing, messages: list[dict]) -> dict:
    """Counts and names of what a request carried, for "what this answer was sent" (no message is copied)."""
    from conversations.store import is_compaction_summary

    prefix = firing.stored_prefix or {}
    return {
        "messages": len(messages),
        "stored_messages": int(prefix.get("length", 0)),
        "unsaved_messages": len(firing.pending_messages),
        "compaction_summary": any(is_compaction_summary(m) for m in messages[:2]),
        "tools": [binding["name"] for binding in firing.tool_bindings],
    }


def _record_unbuilt_step(firing: Firing, step: LlmStep, exc) -> None:
    """The request could not be built (the stored list the firing extends is gone or unreadable): the claimed step
    made no call, so nothing is billed; the firing ends saying why."""
    with transaction.atomic():
        updated = LlmStep.objects.filter(pk=step.pk, state=LlmStep.State.STARTED).update(
            state=LlmStep.State.FAILED, error_code=exc.code, finished_at=timezone.now(), duration_ms=0
        )
        if not updated:
            return
        locked = Firing.objects.select_for_update(of=("self",)).get(pk=firing.pk)
        end_firing(locked, state=Firing.State.FAILED, error_code=exc.code, error_message=exc.message)


# --- persist ------------------------------------------------------------------------------


def persist_turn(firing_id: str, iteration: int) -> None:
    with transaction.atomic():
        firing = _lock_firing(firing_id)
        if firing is None:
            return
        step = LlmStep.objects.select_for_update().filter(firing=firing, iteration=iteration).first()
        if step is None:
            return
        if firing.is_terminal:
            _bill_orphan_step(firing, step)  # ended meanwhile (a reset): the call still cost money
            return
        if step.state == LlmStep.State.COMPLETED:
            _save_assistant_turn(firing, step)
        elif step.state != LlmStep.State.PERSISTED:
            return  # failed or ambiguous: the firing was ended by whoever recorded that
        elif _tool_phase_done(firing, step):
            # A duplicate delivery after this step's commit (a redelivered message, a second teammate's end): the
            # results are in the list and the next step was started (or, lost, is found by the watchdog).
            return
        _advance_tools(firing, step)
        firing_save_changes(firing)


def _bill_orphan_step(firing: Firing, step: LlmStep) -> None:
    if step.state != LlmStep.State.COMPLETED:
        return
    usage = (step.result or {}).get("usage") or {}
    record_llm_usage(firing, idempotency_key=f"llm-step:{step.pk}", kind="llm", outcome="ok", usage=usage)
    step.state = LlmStep.State.PERSISTED
    step.save(update_fields=["state"])


def _save_assistant_turn(firing: Firing, step: LlmStep) -> None:
    from conversations import store

    result = step.result
    assistant = result["message"]
    usage = result.get("usage") or {}
    firing.iteration = step.iteration
    firing.tokens_used += int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    record_llm_usage(firing, idempotency_key=f"llm-step:{step.pk}", kind="llm", outcome="ok", usage=usage)
    step.state = LlmStep.State.PERSISTED
    step.save(update_fields=["state"])
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
    from conversations import store

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
    cap = None  # the owner's tool-result cap, read once when a tool answers
    for call in calls:
        if call["id"] in answered:
            continue
        if stopped:
            outcome = ToolOutcome(STOPPED_TOOL_TEXT, is_error=True)
        else:
            binding = bindings.get(call.get("name"))
            if binding is None:
                outcome = unknown_tool_outcome(call.get("name", ""), list(bindings))
            elif binding["is_teammate"]:
                outcome = _delegate(firing, step, call, binding)
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
    from conversations import store

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
    rewrite_firing_messages(firing, cleared)


def _delegate(firing: Firing, step: LlmStep, call: dict, binding: dict) -> ToolOutcome | None:
    child = Firing.objects.filter(parent=firing, parent_tool_call_id=call["id"]).first()
    if child is not None:
        if not child.is_terminal:
            return None
        return teammate_outcome(child)
    task = (call.get("arguments") or {}).get("task") if isinstance(call.get("arguments"), dict) else None
    refusal = delegation_refusal(firing, binding, task)
    if refusal is not None:
        return refusal
    if firing.chat_run_id:
        observers.notify_tool_step(firing=firing, tool_call=call, phase="started")
    # The child carries the chat run too: the run touched the teammate's conversation, so a branch move must
    # know the teammate's cursor (SPEC §6).
    fire_agent(
        firing.workflow,
        firing.generation,
        binding["node_id"],
        task,
        chat_run=firing.chat_run_id,
        parent=firing,
        parent_tool_call_id=call["id"],
    )
    firing.state = Firing.State.WAITING
    firing_mark_changed(firing, "state")
    return None


def _end_for_limit(firing: Firing, limit: str) -> None:
    """End a firing that reached a limit, the reason marked on its last answer (a rewrite of that answer and what
    follows it: rare, once per firing)."""
    from conversations import store

    try:
        messages = list(firing_messages(firing))
    except (store.ConversationConflict, store.ConversationLoadFailed, store.ConversationTooLarge):
        messages = []
    last_text = ""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            # A new dict: a message loaded from the store is read-only (conversations/store/readonly.py).
            messages[index] = {**messages[index], "meta": {**(messages[index].get("meta") or {}), "end_reason": limit}}
            last_text = _text(messages[index])
            rewrite_firing_messages(firing, messages)
            break
    end_firing(firing, state=Firing.State.FINISHED, end_reason=limit, final_text=last_text)


def _after_turn(firing: Firing, step: LlmStep, *, results: list[dict], stopped: bool) -> None:
    assistant = step.result["message"]
    had_tool_calls = bool(results)
    compaction_due = _record_pressure(firing, step, added_messages=[assistant, *results])
    continues = not stopped and had_tool_calls and step.iteration < firing.agent_config["max_iterations"]
    if continues:
        if compaction_due:
            # Compact before the next request, and continue from the compacted list: a summarizer failure then
            # ends this firing (SPEC §2 invariant 8), and the next save cannot undo the compaction. Until then no
            # execute_llm_step of this firing runs (a watchdog's or a duplicate's).
            firing.compaction_pending = True
            firing_mark_changed(firing, "compaction_pending")
            enqueue_step(
                "agent.compact_context",
                firing.workflow_id,
                firing.generation,
                firing.agent_node_id,
                str(firing.pk),
                step.iteration + 1,
            )
        else:
            continue_step("agent.execute_llm_step", str(firing.pk), step.iteration + 1, firing=firing)
        return
    if stopped:
        end_firing(firing, state=Firing.State.STOPPED, end_reason="stopped", final_text=_text(assistant))
    elif not had_tool_calls:
        end_firing(firing, state=Firing.State.FINISHED, end_reason="answered", final_text=_text(assistant))
    else:
        _end_for_limit(firing, "max_iterations")
    if compaction_due:  # the firing is over: the next one starts from the compacted list
        enqueue_step("agent.compact_context", firing.workflow_id, firing.generation, firing.agent_node_id)


# --- pressure and compaction -----------------------------------------------------------------


def _record_pressure(firing: Firing, step: LlmStep, *, added_messages: list[dict]) -> bool:
    """Store the agent's active context pressure; True when the projected next request crosses its threshold."""
    if not firing.uses_conversation:
        return False
    from providers.context import Pressure, estimate_tokens
    from providers.types import ChatRequest

    config = firing.agent_config
    usage = step.result.get("usage") or {}
    # The provider counted the request it just served (usage.input_tokens); what this turn added (the answer and
    # its tool results) is estimated here, inside persist, where no provider call may be made.
    request = _build_request(firing, added_messages, credentials=False)  # for the model and settings only
    added = estimate_tokens(ChatRequest(provider=request.provider, model=request.model, messages=added_messages))
    pressure = Pressure(int(usage.get("input_tokens", 0)) + added, 0, _context_window(request), "estimate")
    key = firing_key(firing)
    _store_pressure(key, pressure, request)
    # After commit, outside every lock: the provider's own token counter replaces the estimate where it has one.
    transaction.on_commit(lambda: _count_pressure(key, firing))
    window = pressure.context_window_tokens
    return bool(window) and pressure.input_tokens >= window * float(config["compaction_threshold"])


def _context_window(request) -> int:
    from providers import capabilities

    return capabilities(request.provider, request.model).context_window


def _store_pressure(key, pressure, request) -> None:
    from conversations import store
    from providers.context import output_headroom

    # Headroom is the output the request will actually allow, within what the window leaves.
    headroom = min(output_headroom(request), max(pressure.context_window_tokens - pressure.input_tokens, 0))
    store.conversation_pressure_record(
        key,
        input_tokens=pressure.input_tokens,
        output_headroom_tokens=headroom,
        context_window_tokens=pressure.context_window_tokens,
    )


def _count_pressure(key, firing: Firing) -> None:
    """The next request as the provider counts it (its free count endpoint), with the owner's key."""
    from providers.context import COUNTING_PROVIDERS, measure_pressure

    if firing.agent_config["provider"] not in COUNTING_PROVIDERS:
        return  # the estimate stored in persist is all there is
    try:
        request = _build_request(firing, firing_messages(firing))
        pressure = measure_pressure(request)
        if pressure.method == "provider_count":
            _store_pressure(key, pressure, request)
    except Exception:  # display only: a failed count keeps the estimate
        logger.warning("context pressure count failed", extra=key.as_log())


def compact_context(
    workflow_id: int, generation: int, agent_node_id: str, firing_id: str | None = None, next_iteration: int = 0
) -> None:
    """Compact the stored conversation; with `firing_id`, then continue that firing at `next_iteration`."""
    from conversations import store
    from conversations.services import usage_record_append
    from conversations.store import CompactionError, conversation_key
    from provider_keys.selectors import owner_request_overrides
    from providers import summarize
    from providers.billing import ledger_fields
    from providers.context import estimate_tokens
    from providers.types import ChatRequest, Usage
    from workflows.models import WorkflowGeneration

    generation_row = (
        WorkflowGeneration.objects.select_related("workflow").filter(workflow_id=workflow_id, number=generation).first()
    )
    if generation_row is None:
        return
    try:
        config = _agent_config(agent_wiring(generation_row.graph, agent_node_id).node)
    except AgentNotFound:
        return
    key = conversation_key(workflow_id, generation, agent_node_id)
    calls = []
    spent = Usage()

    def summarize_messages(messages: list[dict]) -> str:
        calls.append(len(messages))
        provider = summary_provider(config)  # RLM: its backend (a summary runs no code, so no sandbox)
        overrides = owner_request_overrides(owner_id=generation_row.workflow.owner_id, provider=provider)
        summary = summarize(
            provider=provider,
            model=config["model"],
            messages=messages,
            # A Vertex agent needs its own project and agent to run at all.
            runtime_params=(config.get("runtime_params") or None) if provider == config["provider"] else None,
            **overrides,
        )
        used = getattr(summary, "usage", None)  # the real usage of the call, billed below
        for name in ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "cache_creation_tokens"):
            setattr(spent, name, getattr(spent, name) + getattr(used, name, 0))
        return summary

    def count_tokens(messages: list[dict]) -> int:
        return estimate_tokens(ChatRequest(provider=config["provider"], model=config["model"], messages=messages))

    outcome_label = "ok"
    try:
        outcome = store.compact_conversation(key, summarize=summarize_messages, count_tokens=count_tokens)
    except CompactionError as exc:
        outcome_label = "error"
        logger.warning("compaction failed", extra=key.as_log())
        if firing_id:
            _end_after_compaction_failure(firing_id, exc)
            return
        raise
    finally:
        if calls:  # compaction usage is billed like any call (SPEC §2 invariant 8)
            usage_record_append(
                idempotency_key=f"compaction:{key.workflow_id}:{key.generation}:{key.agent_node_id}:{uuid.uuid4().hex}",
                kind="compaction",
                provider=config["provider"],
                model=config["model"],
                outcome=outcome_label,
                owner_id=generation_row.workflow.owner_id,
                workflow_id=workflow_id,
                generation=generation,
                agent_node_id=agent_node_id,
                **ledger_fields(provider=summary_provider(config), model=config["model"], usage=spent.to_dict()),
            )
    logger.info("compaction", extra={**key.as_log(), "status": outcome.status, "reason": outcome.reason})
    if firing_id:
        _continue_after_compaction(firing_id, next_iteration, compacted=outcome.compacted)


def _continue_after_compaction(firing_id: str, next_iteration: int, *, compacted: bool) -> None:
    from conversations import store

    with transaction.atomic():
        firing = Firing.objects.select_for_update().filter(pk=firing_id).first()
        if firing is None or firing.state != Firing.State.RUNNING or firing.iteration != next_iteration - 1:
            return
        if compacted:
            # The firing continues from the compacted list (its unsaved messages, if any, are in it: compaction
            # keeps the latest turn verbatim).
            snapshot = store.load_conversation_snapshot(firing_key(firing))
            repaired = store.close_unanswered_tool_calls(snapshot.messages)
            firing.stored_prefix = store.StoredPrefix.of_snapshot(snapshot).as_dict()
            firing.pending_messages = []
            if repaired is not snapshot.messages:
                firing.stored_prefix, firing.pending_messages = {"replaces": snapshot.version}, repaired
            firing_mark_changed(firing, "pending_messages", "stored_prefix")
        firing.compaction_pending = False
        firing_save_changes(firing, "compaction_pending")
        continue_step("agent.execute_llm_step", str(firing.pk), next_iteration)


def _end_after_compaction_failure(firing_id: str, exc) -> None:
    with transaction.atomic():
        firing = Firing.objects.select_for_update().filter(pk=firing_id).first()
        if firing is not None:
            end_firing(firing, state=Firing.State.FAILED, error_code=exc.code, error_message=exc.message)
