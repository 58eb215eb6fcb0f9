"""Context pressure after a turn and `agent.compact_context` (docs/invariants.md#compaction): summarize outside any
lock, activate by compare-and-swap, then continue (or end) the firing."""

from __future__ import annotations

import contextlib
import logging
import uuid

from django.db import transaction
from django.utils import timezone

import providers
from agents.dispatch import continue_step, enqueue_step
from agents.locks import firing_for_update
from agents.models import Firing, LlmStep
from agents.rows import execute_statements
from agents.services.firings import (
    firing_end,
    firing_key,
    firing_mark_changed,
    firing_save_changes,
    firing_write_along,
)
from agents.services.heartbeat import CompactionHeartbeat
from agents.services.messages import firing_messages
from agents.services.runtime_runs import summary_provider
from agents.usage import record_llm_usage
from agents.wiring import AgentNotFound, agent_wiring
from conversations import store
from conversations.services import UsageEntry, usage_record_append
from conversations.store import CompactionError, conversation_key
from provider_keys.selectors import owner_request_overrides
from providers import capabilities
from providers.billing import ledger_fields
from providers.context import COUNTING_PROVIDERS, Pressure, estimate_tokens, measure_pressure, output_headroom
from providers.types import ChatRequest, Usage
from workflows.selectors import generation_with_workflow

from .prepare import agent_config_of
from .provider_request import provider_request_of

logger = logging.getLogger("agents.step")


def pressure_record_after_turn(firing: Firing, step: LlmStep, *, added_messages: list[dict]) -> bool:
    """Store the agent's active context pressure; True when the projected next request crosses its threshold."""
    if not firing.uses_conversation:
        return False

    config = firing.agent_config
    usage = step.result.get("usage") or {}
    # The provider counted the request it just served (usage.input_tokens); what this turn added (the answer and
    # its tool results) is estimated here, inside persist, where no provider call may be made.
    request = provider_request_of(firing, added_messages, credentials=False)  # for the model and settings only
    added = estimate_tokens(ChatRequest(provider=request.provider, model=request.model, messages=added_messages))
    pressure = Pressure(int(usage.get("input_tokens", 0)) + added, 0, _context_window(request), "estimate")
    key = firing_key(firing)
    firing_write_along(firing, _pressure_statements(key, pressure, request))  # with the firing's write, at the end
    # After commit, outside every lock: the provider's own token counter replaces the estimate where it has one.
    transaction.on_commit(lambda: _count_pressure(key, firing))
    window = pressure.context_window_tokens
    return bool(window) and pressure.input_tokens >= window * float(config["compaction_threshold"])


def _context_window(request) -> int:
    return capabilities(request.provider, request.model).context_window


def _pressure_statements(key, pressure, request) -> list[tuple[str, str, list]]:
    # Headroom is the output the request will actually allow, within what the window leaves.
    headroom = min(output_headroom(request), max(pressure.context_window_tokens - pressure.input_tokens, 0))
    return store.conversation_pressure_statements(
        key,
        input_tokens=pressure.input_tokens,
        output_headroom_tokens=headroom,
        context_window_tokens=pressure.context_window_tokens,
    )


def _store_pressure(key, pressure, request) -> None:
    execute_statements(_pressure_statements(key, pressure, request))


def _count_pressure(key, firing: Firing) -> None:
    """The next request as the provider counts it (its free count endpoint), with the owner's key."""
    if firing.agent_config["provider"] not in COUNTING_PROVIDERS:
        return  # the estimate stored in persist is all there is
    try:
        request = provider_request_of(firing, firing_messages(firing))
        pressure = measure_pressure(request)
        if pressure.method == "provider_count":
            _store_pressure(key, pressure, request)
    except Exception:  # display only: a failed count keeps the estimate
        logger.warning("context pressure count failed", extra=key.as_log())


def compact_context(
    workflow_id: int, generation: int, agent_node_id: str, firing_id: str | None = None, next_iteration: int = 0
) -> None:
    """Compact the stored conversation; with `firing_id`, then continue that firing at `next_iteration`."""
    if firing_id and not _firing_still_waits_for(firing_id, next_iteration):
        # The firing moved on without it (the watchdog resumed it after this compaction went silent, or it ended):
        # compacting now would change the list under a firing that no longer expects it.
        logger.info("compaction no longer awaited", extra={"firing_id": firing_id})
        return
    generation_row = generation_with_workflow(workflow_id=workflow_id, number=generation)
    if generation_row is None:
        return
    try:
        config = agent_config_of(agent_wiring(generation_row.graph, agent_node_id).node)
    except AgentNotFound:
        return
    key = conversation_key(workflow_id, generation, agent_node_id)
    calls = []
    spent = Usage()

    def summarize_messages(messages: list[dict]) -> str:
        calls.append(len(messages))
        provider = summary_provider(config)  # RLM: its backend (a summary runs no code, so no sandbox)
        overrides = owner_request_overrides(owner_id=generation_row.workflow.owner_id, provider=provider)
        summary = providers.summarize(
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
        with CompactionHeartbeat(firing_id) if firing_id else contextlib.nullcontext():
            outcome = store.compact_conversation(key, summarize=summarize_messages, count_tokens=count_tokens)
    except CompactionError as exc:
        outcome_label = "error"
        logger.warning("compaction failed", extra=key.as_log())
        if firing_id:
            _end_after_compaction_failure(firing_id, exc)
            return
        raise
    finally:
        if calls:  # compaction usage is billed like any call (docs/invariants.md#compaction)
            usage_record_append(
                entry=UsageEntry(
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
            )
    logger.info("compaction", extra={**key.as_log(), "status": outcome.status, "reason": outcome.reason})
    if firing_id:
        _continue_after_compaction(firing_id, next_iteration, compacted=outcome.compacted)


def _firing_still_waits_for(firing_id: str, next_iteration: int) -> bool:
    """Whether the firing still waits for this compaction; if so, its row is touched (the compaction's first beat),
    in one conditional statement, so the watchdog's resume (`compaction_lost_resume`) and this start never both win."""
    return bool(
        Firing.objects.filter(
            pk=firing_id, state=Firing.State.RUNNING, compaction_pending=True, iteration=next_iteration - 1
        ).update(updated_at=timezone.now())
    )


def _continue_after_compaction(firing_id: str, next_iteration: int, *, compacted: bool) -> None:
    with transaction.atomic():
        firing = firing_for_update(firing_id)
        if firing is None or firing.state != Firing.State.RUNNING or firing.iteration != next_iteration - 1:
            return
        if compacted:
            _continue_from_the_stored_list(firing, store.load_conversation_snapshot(firing_key(firing)))
        firing.compaction_pending = False
        firing_save_changes(firing, "compaction_pending")
        continue_step("agent.execute_llm_step", str(firing.pk), next_iteration)


def compaction_lost_resume(firing_id, *, silent_before) -> bool:
    """Continue a firing whose compaction went silent before `silent_before` (its worker was lost mid-summary, or
    its task never arrived): from the compacted list if the compaction got as far as swapping it in, else from its
    own list as it was, a turn over the threshold (the next turn's save asks for a compaction again). No second
    summary is asked for. False when the firing is not in that state (any more)."""
    with transaction.atomic():
        firing = firing_for_update(firing_id)
        if (
            firing is None
            or firing.state != Firing.State.RUNNING
            or not firing.compaction_pending
            or firing.updated_at >= silent_before
        ):
            return False
        known_version = (firing.stored_prefix or {}).get("version")
        try:
            snapshot = store.load_conversation_snapshot(firing_key(firing))
            if snapshot.version != known_version:
                _continue_from_the_stored_list(firing, snapshot)  # the swap went through before the compaction was lost
        except (store.ConversationLoadFailed, store.ConversationTooLarge) as exc:
            firing_end(firing, state=Firing.State.FAILED, error_code=exc.code, error_message=exc.message)
            return True
        # Whether its summary call was made (and billed by the provider) is not known: recorded as such, once.
        record_llm_usage(
            firing,
            idempotency_key=f"compaction-lost:{firing.pk}:{firing.iteration}",
            kind="compaction",
            outcome="ambiguous",
        )
        firing.compaction_pending = False
        firing_save_changes(firing, "compaction_pending")
        enqueue_step("agent.execute_llm_step", str(firing.pk), firing.iteration + 1)
    logger.warning("compaction lost; the firing continues without it", extra={"firing_id": str(firing_id)})
    return True


def _continue_from_the_stored_list(firing: Firing, snapshot) -> None:
    """The locked firing continues from `snapshot`, the stored list as just loaded (its unsaved messages, if any,
    are in it: compaction keeps the latest turn verbatim)."""
    repaired = store.close_unanswered_tool_calls(snapshot.messages)
    firing.stored_prefix = store.StoredPrefix.of_snapshot(snapshot).as_dict()
    firing.pending_messages = []
    if repaired is not snapshot.messages:
        firing.stored_prefix, firing.pending_messages = {"replaces": snapshot.version}, repaired
    firing_mark_changed(firing, "pending_messages", "stored_prefix")


def _end_after_compaction_failure(firing_id: str, exc) -> None:
    with transaction.atomic():
        firing = firing_for_update(firing_id)
        if firing is not None:
            firing_end(firing, state=Firing.State.FAILED, error_code=exc.code, error_message=exc.message)
