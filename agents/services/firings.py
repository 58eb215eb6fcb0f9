"""Starting, stopping and ending firings."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import observers
from agents.dispatch import enqueue_step
from agents.locks import firing_for_update, firings_live_for_update
from agents.models import Firing
from agents.rows import execute_statements, insert, update_fields
from agents.services.runtime_dirs import runtime_dirs_on_firing_end
from conversations import store
from conversations.store import conversation_key

logger = logging.getLogger("agents.firing")


class FiringRefused(ValueError):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def firing_start(
    *,
    workflow,
    generation: int,
    agent_node_id: str,
    prompt: str,
    chat_run=None,
    parent: Firing | None = None,
    parent_tool_call_id: str = "",
    trigger_node_id: str = "",
    trigger_label: str = "",
) -> uuid.UUID:
    """Create a firing and start its chain after commit; returns the firing id. `trigger_node_id` and
    `trigger_label` name the schedule or webhook trigger whose message it answers, for the run history.

    Callers may be inside a transaction (the chat admits a run and fires in one); the first
    task is sent only when it commits.
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise FiringRefused("invalid_request", "The prompt is empty.")
    if len(prompt) > settings.AGENT_MAX_PROMPT_CHARS:
        raise FiringRefused(
            "invalid_request", f"The prompt is longer than {settings.AGENT_MAX_PROMPT_CHARS} characters."
        )
    chain = [*(parent.delegation_chain if parent else []), agent_node_id]
    # One INSERT: outside a transaction it commits by itself and the task is sent right after it (on_commit runs
    # at once in autocommit); inside one, the task goes out when the caller's transaction commits.
    firing = Firing(
        workflow=workflow,
        generation=generation,
        agent_node_id=agent_node_id,
        prompt=prompt,
        parent=parent,
        parent_tool_call_id=parent_tool_call_id,
        depth=(parent.depth + 1) if parent else 0,
        delegation_chain=chain,
        chat_run_id=getattr(chat_run, "pk", chat_run),
        trigger_node_id=trigger_node_id[:200],
        trigger_label=trigger_label[:300],
    )
    insert(firing)  # SQL built once per process (agents/rows.py): the chat and the API start a firing per message
    enqueue_step("agent.prepare_payload", str(firing.pk))
    logger.info(
        "firing queued",
        extra={
            "firing_id": str(firing.pk),
            "workflow_id": workflow.pk,
            "generation": generation,
            "agent": agent_node_id,
        },
    )
    return firing.pk


def firing_request_stop(*, firing_id) -> bool:
    """Ask a firing (and the teammates it is waiting for) to stop. Returns False when it had already ended."""
    with transaction.atomic():
        updated = (
            Firing.objects.filter(pk=firing_id).exclude(state__in=Firing.TERMINAL_STATES).update(stop_requested=True)
        )
        if updated:
            # Children stop too: the parent's answer is being dropped.
            for child_id in Firing.objects.filter(parent_id=firing_id).values_list("pk", flat=True):
                firing_request_stop(firing_id=child_id)
            queued = firing_for_update(firing_id, state=Firing.State.QUEUED)
            if queued is not None:
                firing_end(queued, state=Firing.State.STOPPED, end_reason="stopped")
    return bool(updated)


def firings_end_on_reset(*, workflow_id: int) -> int:
    """End every live firing of the workflow with code `reset` (inside the reset transaction); returns how many.

    Each is also marked stopped, in the same single write as its end: a provider call in flight is told to stop;
    when it returns, persist finds the firing ended, bills the call and saves nothing, so no turn lands in the
    conversations the reset is clearing.
    """
    ended = 0
    for firing in firings_live_for_update(workflow_id=workflow_id):
        firing.stop_requested = True
        firing_mark_changed(firing, "stop_requested")
        firing_end(firing, state=Firing.State.FAILED, error_code="reset", error_message="The workflow was reset.")
        ended += 1
    return ended


def firing_end(
    firing: Firing,
    *,
    state: str,
    end_reason: str = "",
    error_code: str = "",
    error_message: str = "",
    final_text: str | None = None,
) -> None:
    """Move a locked firing to a terminal state, release its lease and wake its parent, all on this commit."""

    if firing.is_terminal:
        return
    firing.state = state
    firing.end_reason = end_reason or state
    firing.error_code = error_code
    firing.error_message = error_message[:2000]
    if final_text is not None:
        firing.final_text = final_text
    firing.finished_at = timezone.now()
    # A finished firing keeps no message list: its turn is in the store, its steps keep what run history needs.
    firing.pending_messages = []
    if firing.uses_conversation and firing.lease_token:
        firing_write_along(
            firing, store.release_firing_lease_statements(firing_key(firing), owner_token=firing.lease_token)
        )
    firing_save_changes(
        firing, "state", "end_reason", "error_code", "error_message", "final_text", "finished_at", "pending_messages"
    )
    if firing.parent_id:
        # The parent waits in its tool phase; persist_turn is re-entrant and picks the child's answer up.
        parent_iteration = Firing.objects.filter(pk=firing.parent_id).values_list("iteration", flat=True).first()
        if parent_iteration is not None:
            enqueue_step("agent.persist_turn", str(firing.parent_id), parent_iteration)
    if firing.chat_run_id:
        observers.notify_ended(firing=firing)

    runtime_dirs_on_firing_end(firing)  # an agent runtime's directory goes after this commit, when unused
    logger.info(
        "firing ended",
        extra={
            "firing_id": str(firing.pk),
            "state": state,
            "end_reason": firing.end_reason,
            "error_code": error_code,
            "iterations": firing.iteration,
            "tokens": firing.tokens_used,
        },
    )


def firing_mark_changed(firing: Firing, *fields: str) -> None:
    """Note fields changed on a locked firing; `firing_save_changes` writes them all in one UPDATE.

    A step changes the firing several times under its row lock (answer, stored prefix, tool results, end);
    only the row as it is at commit matters, so it is written once.
    """
    firing.__dict__.setdefault("_unsaved_fields", set()).update(fields)


def firing_write_along(firing: Firing, statements: list[tuple[str, str, list]]) -> None:
    """Send `statements` (named writes `(name, sql, params)` to other rows, e.g. the bill, the step's state, the
    lease's release) with the firing's next write (`firing_save_changes`), as WITH clauses of that one UPDATE.

    A step writes its firing once, at the end of its transaction; writes nothing in that transaction reads back
    before then go with it, so a turn pays one round trip for them all. Only for writes in the transaction that
    holds the firing's lock and writes the firing before it commits (persist, firing_end). A name already waiting
    sends the waiting statement at once (a WITH clause names one statement)."""
    waiting = firing.__dict__.setdefault("_write_along", [])
    names = {name for name, _, _ in statements}
    if any(name in names for name, _, _ in waiting):
        execute_statements(waiting)
        waiting.clear()
    waiting.extend(statements)


def firing_save_changes(firing: Firing, *fields: str) -> None:
    """Write `fields` and every field marked changed, in one UPDATE, with the writes waiting to go along
    (`firing_write_along`); nothing when there are none."""
    changed = firing.__dict__.pop("_unsaved_fields", set()) | set(fields)
    along = firing.__dict__.pop("_write_along", [])
    if changed:
        update_fields(firing, [*changed, "updated_at"], along=along)
    else:
        execute_statements(along)


def firing_key(firing: Firing):

    return conversation_key(firing.workflow_id, firing.generation, firing.agent_node_id)


def firing_deadline(seconds: int):
    return timezone.now() + timedelta(seconds=seconds)
