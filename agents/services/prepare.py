"""Step 1 of a firing, `agent.prepare_payload`: resolve the agent and its tools from the generation's graph, take
the conversation's firing lease (docs/architecture.md#firing-lease), load and seed the list
(docs/invariants.md#seeding), let the chat record its cursor, and continue with step 1."""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import observers
from agents.dispatch import continue_step, enqueue_step
from agents.locks import firing_for_update
from agents.models import Firing
from agents.rows import update_fields
from agents.services.firings import (
    firing_deadline,
    firing_end,
    firing_key,
    firing_mark_changed,
)
from agents.services.messages import firing_messages_seed
from agents.tools import (
    ToolUnavailable,
    tool_definition,
)
from agents.wiring import AgentNotFound, agent_wiring
from conversations import store
from core.errors import NotFoundError
from providers.wire import text_block
from workflows.selectors import generation_graph

from .agent_config import agent_config_of
from .compaction import compaction_land_ready, compaction_request
from .window import too_long_message, window_fit

logger = logging.getLogger("agents.step")


def _generation_graph(firing: Firing) -> dict:
    try:
        return generation_graph(firing.workflow, firing.generation, normalize=False)
    except NotFoundError:
        return {}  # the agent is then not found, and the firing fails saying so


def prepare_payload(firing_id: str) -> None:
    with transaction.atomic():
        firing = firing_for_update(firing_id, with_workflow=True)
        if firing is None or firing.state != Firing.State.QUEUED:
            return  # already prepared or ended: a duplicate delivery
        if firing.stop_requested:
            firing_end(firing, state=Firing.State.STOPPED, end_reason="stopped")
            return
        graph = _generation_graph(firing)
        try:
            wiring = agent_wiring(graph, firing.agent_node_id)
        except AgentNotFound as exc:
            firing_end(firing, state=Firing.State.FAILED, error_code="agent_not_found", error_message=str(exc))
            return
        config = agent_config_of(wiring.node)
        uses_conversation = wiring.context_node_id is not None and firing.generation > 0
        key = firing_key(firing)
        if uses_conversation:
            token = firing.lease_token or uuid.uuid4().hex
            if not store.acquire_firing_lease(key, owner_token=token, ttl_seconds=settings.FIRING_LEASE_TTL_SECONDS):
                # Another firing of this conversation is mid-turn (docs/invariants.md#one-firing-per-conversation):
                # come back later instead of blocking a worker. The lease row is locked by this statement until
                # prepare commits (docs/architecture.md#lock-order, 2a). Touching the firing row tells the watchdog
                # this firing is not lost.
                enqueue_step("agent.prepare_payload", str(firing.pk), countdown=settings.AGENT_LEASE_RETRY_SECONDS)
                firing.save(update_fields=["updated_at"])
                return
            firing.lease_token = token
        try:
            snapshot = store.load_conversation_snapshot(key) if uses_conversation else None
            if snapshot is not None and snapshot.compaction_ready:
                # A summary that finished while the last turn held the lease lands before this turn reads the list.
                compaction_land_ready(firing, config=config)
                snapshot = store.load_conversation_snapshot(key)
        except (store.ConversationLoadFailed, store.ConversationTooLarge) as exc:
            firing.uses_conversation = uses_conversation
            firing_end(firing, state=Firing.State.FAILED, error_code=exc.code, error_message=exc.message)
            return
        stored = store.close_unanswered_tool_calls(snapshot.messages) if snapshot else []
        contribution = observers.PrepareContribution()
        if firing.chat_run_id:
            contribution = observers.notify_prepared(firing=firing, stored_messages=stored)
        system_prompt = config["system_prompt"] + contribution.system_suffix
        user_prompt = contribution.user_prefix + firing.prompt
        if contribution.user_blocks:
            # Attached files ride in the user's message as references (docs/chat.md#files).
            user_prompt = {"role": "user", "blocks": [text_block(user_prompt), *contribution.user_blocks]}
        firing.uses_conversation = uses_conversation
        firing_messages_seed(
            firing, snapshot=snapshot, repaired=stored, seeded=store.seed_request(system_prompt, stored, user_prompt)
        )
        firing.agent_config = config
        graph_nodes = {n["id"]: n for n in graph.get("nodes", [])}
        try:
            firing.tool_bindings = [_binding_with_definition(b.to_dict(), graph_nodes) for b in wiring.tools]
        except ToolUnavailable as exc:
            firing_end(firing, state=Firing.State.FAILED, error_code="tool_unavailable", error_message=str(exc))
            return
        waits = False
        if uses_conversation:
            if "replaces" in firing.stored_prefix or snapshot is None:
                fit = window_fit(firing, firing.pending_messages)
            else:
                fit = window_fit(
                    firing,
                    [*snapshot.messages, *firing.pending_messages],
                    stored_count=len(snapshot.messages),
                    stored_bytes=snapshot.size_bytes,
                )
            if not fit.fits_compacted:
                # Even [system, summary, latest turn, this message] would not fit: nothing is sent, nothing stored.
                firing_mark_changed(firing, "agent_config", "tool_bindings", "uses_conversation", "lease_token")
                firing_end(
                    firing,
                    state=Firing.State.FAILED,
                    error_code="context_window_exceeded",
                    error_message=too_long_message(firing),
                )
                return
            # Over the window: wait for the running compaction, or compact now, before the first step.
            waits = not fit.fits and compaction_request(firing, next_iteration=1) != "none"
        firing.state = Firing.State.RUNNING
        firing.started_at = timezone.now()
        firing.deadline_at = firing_deadline(config["max_wall_seconds"])
        update_fields(
            firing,
            [
                "pending_messages",
                "stored_prefix",
                "agent_config",
                "tool_bindings",
                "uses_conversation",
                "lease_token",
                "state",
                "started_at",
                "deadline_at",
                "compaction_pending",
                "updated_at",
            ],
        )
        if not waits:
            continue_step("agent.execute_llm_step", str(firing.pk), 1, firing=firing)
    logger.info("firing prepared", extra={"firing_id": firing_id, "stored_messages": len(stored)})


def _binding_with_definition(binding: dict, graph_nodes: dict) -> dict:
    definition = tool_definition(binding, graph_nodes)
    return {**binding, "description": definition.description, "parameters": definition.parameters}
