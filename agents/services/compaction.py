"""Context pressure after a turn, the conversation's one compaction slot, and `agent.compact_context`
(docs/invariants.md#compaction): summarize outside any lock, land the summary on whatever the turns appended since
its snapshot when the summarised prefix is unchanged, then continue (or end) the firing that waits for it."""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
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

from .agent_config import agent_config_of
from .provider_request import provider_request_of

logger = logging.getLogger("agents.step")


def pressure_record_after_turn(firing: Firing, step: LlmStep, *, added_messages: list[dict]) -> bool:
    """Store the agent's active context pressure; True when a compaction is due (`compaction_due`). When one is,
    a summary that finished while this turn ran (waiting in the slot) lands first, and the pressure is that of the
    compacted list: a compaction is asked for only if even that is still due."""
    if not firing.uses_conversation:
        return False

    config = firing.agent_config
    usage = step.result.get("usage") or {}
    # The provider counted the request it just served (usage.input_tokens); what this turn added (the answer and
    # its tool results) is estimated here, inside persist, where no provider call may be made.
    request = provider_request_of(firing, added_messages, credentials=False)  # for the model and settings only
    added = estimate_tokens(ChatRequest(provider=request.provider, model=request.model, messages=added_messages))
    window = _context_window(request)
    pressure = Pressure(int(usage.get("input_tokens", 0)) + added, 0, window, "estimate")
    due = compaction_due(firing, _over_threshold(pressure, config))
    landed = compaction_land_ready(firing) if due else None
    if landed is not None and landed.compacted:
        # The list changed under the turn: estimate all of it (one read, only when a summary landed).
        whole = provider_request_of(firing, firing_messages(firing), credentials=False)
        pressure = Pressure(estimate_tokens(whole), 0, window, "estimate")
        due = compaction_due(firing, _over_threshold(pressure, config))
    key = firing_key(firing)
    firing_write_along(firing, _pressure_statements(key, pressure, request))  # with the firing's write, at the end
    # After commit, outside every lock: the provider's own token counter replaces the estimate where it has one.
    transaction.on_commit(lambda: _count_pressure(key, firing))
    return due


def _over_threshold(pressure: Pressure, config: dict) -> bool:
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


def compaction_due(firing: Firing, over_threshold: bool) -> bool:
    """A compaction is due after this turn: its projected next request crossed the token threshold of the window, or
    the stored list crossed its share of the byte cap (a big-window model would otherwise reach the cap first)."""
    if not firing.uses_conversation:
        return False
    size = (firing.stored_prefix or {}).get("size_bytes")
    cap = settings.CONVERSATION_SEED_MAX_BYTES * float(settings.AGENT_COMPACTION_BYTE_SHARE)
    return over_threshold or (size is not None and size >= cap)


def compaction_request(firing: Firing, *, next_iteration: int | None = None) -> str:
    """Ask for a compaction of the locked firing's conversation: "started" (this turn claimed the conversation's one
    slot and sent `agent.compact_context`), "waiting" (one is running: the firing, when it must wait before
    `next_iteration`, is continued by it) or "none" (one is already running or waits to land: nothing is queued).

    With `next_iteration` the firing waits (`compaction_pending`) and is continued by the compaction; without it the
    compaction runs beside the conversation's next turns and lands on whatever they appended."""
    key = firing_key(firing)
    waiter = str(firing.pk) if next_iteration else None
    if store.compaction_claim(key, waiting_firing_id=waiter, waiting_iteration=next_iteration or 0):
        args = (str(firing.pk), next_iteration) if next_iteration else ()
        enqueue_step("agent.compact_context", firing.workflow_id, firing.generation, firing.agent_node_id, *args)
        status = "started"
    elif next_iteration and store.compaction_wait(key, firing_id=waiter, iteration=next_iteration):
        status = "waiting"
    else:
        return "none"
    if next_iteration:
        firing.compaction_pending = True
        firing_mark_changed(firing, "compaction_pending")
    return status


def _count_tokens(config: dict):
    def count_tokens(messages: list[dict]) -> int:
        return estimate_tokens(ChatRequest(provider=config["provider"], model=config["model"], messages=messages))

    return count_tokens


def compaction_land_ready(firing: Firing, *, config: dict | None = None):
    """Inside the locked firing's transaction, while it holds its conversation's lease: land the summary that waits
    in the slot (a compaction that finished while this firing was mid-turn). The firing's stored prefix then names
    the compacted list; its unsaved messages follow it as they followed the old one. None when nothing was ready
    or the firing's list cannot follow a compacted one (a first save that rewrites the stored list; then the
    summary waits for the next turn)."""
    prefix = firing.stored_prefix
    if prefix is not None and ("length" not in prefix or prefix.get("detached")):
        return None
    key = firing_key(firing)
    slot = store.compaction_slot_for_update(key)
    if slot is None or slot[0] != "ready":
        return None
    identity = store.PrefixIdentity(int(slot[3] or 0), int(slot[4]), slot[5])
    config = config or firing.agent_config
    # Prepare (no prefix yet) reads the list after this; a firing mid-turn follows the compacted list, and keeps the
    # replaced one (retained.py) only for the rare list someone else rewrote under it meanwhile.
    outcome = store.compaction_land_locked(
        key, identity, slot[6], count_tokens=_count_tokens(config), retain=prefix is not None
    )
    _finish(key, config, outcome, owner_id=firing.workflow.owner_id, paid=False)
    if outcome.compacted and prefix is not None:
        _follow_compaction(firing, outcome)
    return outcome


def _finish(key, config: dict, outcome, *, owner_id, paid: bool) -> None:
    store.compaction_finish(key, outcome="landed" if outcome.compacted else "discarded", paid=paid)
    logger.info("compaction", extra={**key.as_log(), "status": outcome.status, "reason": outcome.reason})
    if outcome.status == "discarded":
        # Paid for (its call is on the ledger) and not used: recorded as such, with why (docs/invariants.md).
        usage_record_append(
            entry=UsageEntry(
                idempotency_key=f"compaction-discarded:{key.workflow_id}:{key.generation}:{key.agent_node_id}:"
                f"{uuid.uuid4().hex}",
                kind="compaction",
                provider=config["provider"],
                model=config["model"],
                outcome="discarded",
                owner_id=owner_id,
                workflow_id=key.workflow_id,
                generation=key.generation,
                agent_node_id=key.agent_node_id,
                meta={"reason": outcome.reason},
            )
        )


def _follow_compaction(firing: Firing, outcome) -> None:
    """The locked firing extended the list the compaction replaced: it now extends the compacted one."""
    prefix = firing.stored_prefix or {}
    replaced = outcome.replaced
    if "length" in prefix and (prefix["length"], prefix["version"], prefix["digest"]) == (
        replaced.length,
        replaced.version,
        replaced.digest,
    ):
        firing.stored_prefix = outcome.written.as_dict()
    elif "replaces" in prefix and not prefix.get("detached") and prefix["replaces"] == replaced.version:
        # A first save that rewrites the stored list (a new system prompt): its list is [system, the stored turns,
        # the new message]; it becomes [system, the compacted turns, the new message].
        snapshot = store.load_conversation_snapshot(firing_key(firing))
        systems = [m for m in firing.pending_messages if m.get("role") == "system"]
        kept = [m for m in snapshot.messages if m.get("role") != "system"]
        firing.stored_prefix = {"replaces": snapshot.version}
        firing.pending_messages = [*systems, *kept, firing.pending_messages[-1]]
    else:
        return
    firing_mark_changed(firing, "stored_prefix", "pending_messages")


def compact_context(
    workflow_id: int, generation: int, agent_node_id: str, firing_id: str | None = None, next_iteration: int = 0
) -> None:
    """Compact the stored conversation in its claimed slot; the firing waiting for it (`firing_id` when it was the
    one that asked, or one that came to wait since) continues after."""
    if firing_id and not _firing_still_waits_for(firing_id, next_iteration):
        # The firing moved on without it (the watchdog resumed it after this compaction went silent, or it ended):
        # compacting now would change the list under a firing that no longer expects it.
        logger.info("compaction no longer awaited", extra={"firing_id": firing_id})
        store.compaction_release_unawaited(
            conversation_key(workflow_id, generation, agent_node_id), firing_id=firing_id
        )
        return
    key = conversation_key(workflow_id, generation, agent_node_id)
    generation_row = generation_with_workflow(workflow_id=workflow_id, number=generation)
    try:
        if generation_row is None:
            raise AgentNotFound("the generation is gone")
        config = agent_config_of(agent_wiring(generation_row.graph, agent_node_id).node)
    except AgentNotFound:
        store.compaction_finish(key, outcome="skipped", paid=False)
        return
    owner_id = generation_row.workflow.owner_id
    calls = []
    spent = Usage()

    def summarize_messages(messages: list[dict]) -> str:
        calls.append(len(messages))
        provider = summary_provider(config)  # RLM: its backend (a summary runs no code, so no sandbox)
        overrides = owner_request_overrides(owner_id=owner_id, provider=provider)
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

    outcome_label = "ok"
    summary = None
    try:
        with CompactionHeartbeat(key):
            snapshot = store.compaction_snapshot(key)
            if snapshot.identity is not None:
                summary = store.compaction_summarize(key, snapshot, summarize_messages)
        # Billed after the landing (below), as one write: a worker lost between the call and the landing leaves a
        # firing the watchdog continues and records as ambiguous, never a bill for a call nobody saw land.
        _land(key, config, snapshot.identity, summary, owner_id=owner_id)
    except (CompactionError, store.ConversationLoadFailed) as exc:
        outcome_label = "error"
        logger.warning("compaction failed", extra=key.as_log())
        waiting = store.compaction_waiter(key)
        store.compaction_finish(key, outcome="error", paid=bool(calls))
        if waiting is not None:
            _end_after_compaction_failure(waiting[0], exc)
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
                    owner_id=owner_id,
                    workflow_id=workflow_id,
                    generation=generation,
                    agent_node_id=agent_node_id,
                    **ledger_fields(provider=summary_provider(config), model=config["model"], usage=spent.to_dict()),
                )
            )


def _land(key, config: dict, identity, summary: str | None, *, owner_id) -> None:
    """Land a paid-for summary (or, with none, just free the slot), then continue the firing that waits for it.

    Who may rewrite the list: the compaction itself when the firing that holds the conversation's lease is the one
    waiting for it (it does nothing until continued) or when no firing holds the lease (taken for the moment of the
    write, so no firing prepares meanwhile). When a firing is mid-turn, the summary is left `ready` in the slot and
    that firing lands it at its next save (`compaction_land_ready`): nothing rewrites a list under a running turn.
    Locks: the waiting firing, the lease, the slot, the header (docs/architecture.md#lock-order)."""
    token = f"compaction-{uuid.uuid4().hex}"
    for _attempt in range(5):
        waiting = store.compaction_waiter(key)
        with transaction.atomic():
            firing = firing_for_update(waiting[0]) if waiting else None
            waits = (
                firing is not None
                and firing.state == Firing.State.RUNNING
                and firing.compaction_pending
                and firing.iteration == waiting[1] - 1
            )
            leased = not waits and store.acquire_firing_lease(key, owner_token=token, ttl_seconds=60)
            slot = store.compaction_slot_for_update(key)
            if slot is None or slot[0] != "running":
                return  # claimed again after this one went silent: the newer compaction decides
            if (str(slot[1]) if slot[1] else None) != (waiting[0] if waiting else None):
                transaction.set_rollback(True)  # a firing came to wait meanwhile: decide again, with it
                continue
            if summary is None:
                store.compaction_finish(key, outcome="skipped", paid=False)
                outcome = None
            elif waits or leased:
                outcome = store.compaction_land_locked(
                    key, identity, summary, count_tokens=_count_tokens(config), retain=not leased
                )
                _finish(key, config, outcome, owner_id=owner_id, paid=True)
            else:
                store.compaction_ready(key, identity=identity, summary=summary)
                logger.info("compaction ready; the firing mid-turn lands it", extra=key.as_log())
                return
            if leased:
                store.release_firing_lease(key, owner_token=token)
            if waits:
                _continue_waiting_firing(firing, waiting[1], outcome)
            return
    logger.warning("compaction could not settle who waits for it; the slot is left to expire", extra=key.as_log())


def _continue_waiting_firing(firing: Firing, next_iteration: int, outcome) -> None:
    """The locked firing waited for this compaction before step `next_iteration`: it continues from the compacted
    list (or its own, when the compaction did not land); before a first step, only if that request now fits."""
    if outcome is not None and outcome.compacted:
        _follow_compaction(firing, outcome)
    firing.compaction_pending = False
    firing_save_changes(firing, "compaction_pending")
    if next_iteration == 1:
        from .window import too_long_message, window_fit

        try:
            fit = window_fit(firing, firing_messages(firing))
        except (store.ConversationConflict, store.ConversationLoadFailed, store.ConversationTooLarge) as exc:
            firing_end(firing, state=Firing.State.FAILED, error_code=exc.code, error_message=exc.message)
            return
        if not fit.fits:
            firing_end(
                firing,
                state=Firing.State.FAILED,
                error_code="context_window_exceeded",
                error_message=too_long_message(firing),
            )
            return
    continue_step("agent.execute_llm_step", str(firing.pk), next_iteration)


def _firing_still_waits_for(firing_id: str, next_iteration: int) -> bool:
    """Whether the firing still waits for this compaction; if so, its row is touched (the compaction's first beat),
    in one conditional statement, so the watchdog's resume (`compaction_lost_resume`) and this start never both win."""
    return bool(
        Firing.objects.filter(
            pk=firing_id, state=Firing.State.RUNNING, compaction_pending=True, iteration=next_iteration - 1
        ).update(updated_at=timezone.now())
    )


def compaction_lost_resume(firing_id, *, silent_before) -> bool:
    """Continue a firing whose compaction went silent before `silent_before` (its worker was lost mid-summary, or
    its task never arrived): from its own list as it is (a compaction lands only while the firing waits, and a
    landing continues it). No second summary is asked for. False when the firing is not in that state (any
    more)."""
    with transaction.atomic():
        firing = firing_for_update(firing_id)
        if (
            firing is None
            or firing.state != Firing.State.RUNNING
            or not firing.compaction_pending
            or firing.updated_at >= silent_before
        ):
            return False
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


def _end_after_compaction_failure(firing_id: str, exc) -> None:
    with transaction.atomic():
        firing = firing_for_update(firing_id)
        if firing is not None:
            firing_end(firing, state=Firing.State.FAILED, error_code=exc.code, error_message=exc.message)
