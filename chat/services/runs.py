"""Sending, stopping and finishing runs. The lane (one run that is not over per session) is checked under the
session's row lock and enforced by a partial unique index.

Lock order (docs/architecture.md, "Chat turn"): Firing -> ChatRun -> ChatSession -> conversation headers. Admission
holds the session and creates a firing (an insert, no lock on an existing row); Stop never holds a run or session
lock while it asks the runtime to stop a firing, because the runtime's `ended` hook comes back for the run.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.selectors import FiringOutcome, chat_run_waits_for_approval, firing_outcome, firing_saved_a_turn
from agents.services.approval_decisions import firing_stop
from agents.services.firings import FiringRefused, firing_start
from chat.errors import refuse
from chat.events import (
    publish_chat_updated,
    publish_run_event,
    run_ended_event,
    run_started_event,
    run_stopping_event,
)
from chat.locks import chat_run_for_update, chat_session_for_update
from chat.models import ChatMessage, ChatRun, ChatSession
from chat.run_stream import forget_run_stream, reset_run_stream, run_stream_state
from chat.services.attachments import message_files_meta
from chat.services.notes import chat_notes_settle
from workflows.graph import trigger_agents
from workflows.selectors import LiveGeneration, live_generation_snapshot, workflow_never_started
from workflows.services import workflow_start

logger = logging.getLogger("chat.runs")


# --- the session --------------------------------------------------------------------------------------------


def chat_session_get(*, workflow) -> ChatSession:
    session = ChatSession.objects.filter(workflow=workflow).first()
    if session is not None:
        return session
    try:
        with transaction.atomic():
            return ChatSession.objects.create(workflow=workflow)
    except IntegrityError:  # two first sends at once: the other one created it
        return ChatSession.objects.get(workflow=workflow)


def chat_session_lock(*, workflow) -> ChatSession:
    """The session row, locked for this transaction: every change of the thread's shape serializes here."""
    session = chat_session_for_update(workflow=workflow)
    if session is None:
        session = chat_session_for_update(session_id=chat_session_get(workflow=workflow).pk)
    return session


def session_message(session: ChatSession, message_id) -> ChatMessage:
    """One of the session's messages; another session's, a missing one or an id that is not a number: not found."""
    try:
        pk = int(message_id)
    except (TypeError, ValueError):
        raise refuse("not_found") from None
    message = ChatMessage.objects.filter(session=session, pk=pk).first()
    if message is None:
        raise refuse("not_found")
    return message


def check_revision(session: ChatSession, expected_revision: int | None) -> None:
    if expected_revision is not None and int(expected_revision) != session.revision:
        raise refuse("revision_conflict", revision=session.revision)


def check_lane(session: ChatSession) -> None:
    active = ChatRun.objects.filter(session=session, state__in=ChatRun.ACTIVE_STATES).values_list("pk", flat=True)
    run_id = active.first()
    if run_id is not None:
        if chat_run_waits_for_approval(chat_run_id=run_id):
            raise refuse("approval_pending", run_id=run_id)
        raise refuse("run_in_progress", run_id=run_id)


def chat_session_bump(session: ChatSession, *, leaf: ChatMessage | None | bool = False) -> None:
    if leaf is not False:
        session.active_leaf = leaf
    session.revision += 1
    session.save(update_fields=["active_leaf", "revision", "updated_at"])


# --- what answers -------------------------------------------------------------------------------------------


def answering_target(*, workflow) -> tuple[int, str]:
    """(live generation, answering agent node id). A workflow never started is started here: the first message
    of a fresh demo should just work. A stopped workflow is refused (starting it again would be a new
    generation, a fresh conversation, which the owner should choose on purpose)."""
    generation = live_generation_snapshot(workflow_id=workflow.pk)
    if generation is None:
        if not workflow_never_started(workflow_id=workflow.pk):
            raise refuse("no_answering_agent")
        started, _ = workflow_start(workflow=workflow)
        generation = LiveGeneration(number=started.number, live=True, graph=started.graph or {})
    workflow.live_generation = generation.number
    if not generation.live:
        raise refuse("workflow_stopped")
    agents = trigger_agents(generation.graph)
    if not agents:
        raise refuse("no_answering_agent")
    return generation.number, agents[0]


def answering_agent_of(workflow) -> str | None:
    """The agent that answers the chat in the live generation (None when there is none). A read, starts nothing."""
    generation = live_generation_snapshot(workflow_id=workflow.pk)
    agents = trigger_agents(generation.graph if generation else {})
    return agents[0] if agents else None


def check_text(text) -> str:
    if not isinstance(text, str) or not text.strip():
        raise refuse("invalid_request", "Write a message first.")
    if len(text) > settings.CHAT_MESSAGE_MAX_CHARS:
        raise refuse("invalid_request", f"A message can be at most {settings.CHAT_MESSAGE_MAX_CHARS} characters.")
    return text


def chat_run_admit(
    *,
    session: ChatSession,
    workflow,
    user_message: ChatMessage,
    kind: str,
    generation: int,
    agent_node_id: str,
    parent_run_id: int | None,
) -> ChatRun:
    """Create the run and its firing in the caller's transaction; the firing's first task is sent on commit."""

    try:
        # No savepoint: on the index's refusal the whole admission rolls back anyway.
        run = ChatRun.objects.create(
            session=session,
            kind=kind,
            state=ChatRun.State.PENDING,
            user_message=user_message,
            parent_run_id=parent_run_id,
            generation=generation,
            agent_node_id=agent_node_id,
        )
    except IntegrityError:
        # The partial unique index: another admission got in first (it cannot under the session lock, but the
        # index is the rule, the lock is how we usually avoid hitting it).
        raise refuse("run_in_progress") from None
    reset_run_stream(run.pk)
    # Sent (not just queued) before the firing's first task is: this process takes seq 1 and a worker takes the
    # later ones, so a worker's first event could otherwise reach the pages first, and a page seeing 2 before 1
    # refetches its snapshot for nothing. Waiting costs the one send (a millisecond or two, bounded by a setting).
    publish_run_event(
        workflow_id=workflow.pk,
        run_id=run.pk,
        event=run_started_event(workflow_id=workflow.pk, kind=kind, state=run.state, user_message_id=user_message.pk),
        wait=True,
    )
    # A message a schedule or webhook sent (and its Try again): the run history names that trigger.
    trigger = (user_message.meta or {}).get("trigger")
    trigger = trigger if isinstance(trigger, dict) else {}
    try:
        run.firing_id = firing_start(
            workflow=workflow,
            generation=generation,
            agent_node_id=agent_node_id,
            prompt=user_message.text,
            chat_run=run,
            trigger_node_id=str(trigger.get("node_id") or ""),
            trigger_label=str(trigger.get("label") or ""),
        )
    except FiringRefused as exc:
        raise refuse("invalid_request", exc.message) from None
    run.save(update_fields=["firing_id", "updated_at"])
    return run


def run_of_reply(message_id: int | None) -> int | None:
    """The id of the run whose reply `message_id` is (None for the owner's messages and the thread's start)."""
    if message_id is None:
        return None
    return ChatRun.objects.filter(reply_message_id=message_id).values_list("pk", flat=True).first()


def sent_before(session: ChatSession, client_message_id: str | None) -> tuple[ChatMessage, ChatRun | None] | None:
    """The message a retried request (same `client_message_id`) already sent, and the run that answered it."""
    if not client_message_id:
        return None
    existing = ChatMessage.objects.filter(session=session, client_message_id=client_message_id).first()
    if existing is None:
        return None
    return existing, ChatRun.objects.filter(user_message=existing).order_by("id").first()


_NEW_MESSAGE_KIND = {ChatRun.Kind.MESSAGE: ChatMessage.Kind.MESSAGE, ChatRun.Kind.EDIT: ChatMessage.Kind.EDIT}


def chat_answer_start(
    *,
    session: ChatSession,
    workflow,
    kind: str,
    answering: tuple[int, str],
    user_message: ChatMessage | None = None,
    text: str = "",
    parent_id: int | None = None,
    client_message_id: str | None = None,
    meta: dict | None = None,
) -> tuple[ChatMessage, ChatRun]:
    """Start an answer in the caller's transaction, under the session lock: the owner's message (a new one, `text`
    under `parent_id`, for send and edit; the existing `user_message` for Try again) becomes the shown leaf, its
    run is admitted, and a branch move tells open pages the thread changed shape (on commit).

    `answering` is (generation, agent node id) from `answering_target`, asked by the caller before it moves the
    branch, so a workflow that cannot answer is refused before anything is rewound."""
    generation, agent_node_id = answering
    if user_message is None:
        user_message = ChatMessage.objects.create(
            session=session,
            parent_id=parent_id,
            role=ChatMessage.Role.USER,
            kind=_NEW_MESSAGE_KIND[kind],
            text=text,
            generation=generation,
            client_message_id=client_message_id or None,
            meta=meta or {},
        )
    run = chat_run_admit(
        session=session,
        workflow=workflow,
        user_message=user_message,
        kind=kind,
        generation=generation,
        agent_node_id=agent_node_id,
        parent_run_id=run_of_reply(user_message.parent_id),
    )
    chat_session_bump(session, leaf=user_message)
    if kind != ChatRun.Kind.MESSAGE:
        # The reason is the run's kind: `edit` or `regenerate`.
        publish_chat_updated(workflow_id=workflow.pk, revision=session.revision, reason=kind)
    return user_message, run


# --- send ---------------------------------------------------------------------------------------------------


def chat_message_send(
    *,
    workflow,
    text: str,
    client_message_id: str | None = None,
    expected_revision: int | None = None,
    meta: dict | None = None,
    file_ids: list | None = None,
) -> tuple[ChatMessage, ChatRun, bool]:
    """Send the owner's message and start its answer. Returns (message, run, created).

    The same `client_message_id` returns the first message and run and starts nothing again (a double click, a
    retried request), even after that run ended. `meta` marks a message a trigger sent in the owner's name
    (`{"trigger": {...}}`, docs/triggers.md). `file_ids` are the owner's uploaded files the message carries
    (docs/chat.md#files): kept as `file` blocks, never bytes; a refused file refuses the whole message."""
    if client_message_id is not None:
        client_message_id = str(client_message_id).strip()[:100] or None
    with transaction.atomic():
        session = chat_session_lock(workflow=workflow)
        replayed = sent_before(session, client_message_id)
        if replayed is not None:
            return *replayed, False
        text = check_text(text)
        if file_ids:
            meta = {**(meta or {}), "files": message_files_meta(owner=workflow.owner_id, file_ids=file_ids)}
        check_revision(session, expected_revision)
        check_lane(session)
        message, run = chat_answer_start(
            session=session,
            workflow=workflow,
            kind=ChatRun.Kind.MESSAGE,
            answering=answering_target(workflow=workflow),
            text=text,
            parent_id=session.active_leaf_id,
            client_message_id=client_message_id,
            meta=meta,
        )
    logger.info("chat message sent", extra={"workflow_id": workflow.pk, "run_id": run.pk})
    return message, run, True


# --- stop ---------------------------------------------------------------------------------------------------


def chat_run_stop(*, workflow, run_id) -> ChatRun:
    """Stop an answer. Pending: stopped at once. Running: `stopping`, and the runtime drops the model call; the
    run ends `stopped` (with what arrived so far) when its firing ends. Stopping an ended run returns it as is."""
    run = ChatRun.objects.filter(pk=_run_pk(run_id), session__workflow=workflow).first()
    if run is None:
        raise refuse("not_found")
    if not run.is_active:
        return run
    if run.firing_id is not None:
        # Outside any chat lock: a queued firing, or one parked for the owner's decision on a tool call, ends right
        # here, and its `ended` hook finishes the run.
        firing_stop(firing_id=run.firing_id)
    with transaction.atomic():
        run = chat_run_for_update(run.pk)
        if run.state in (ChatRun.State.PENDING, ChatRun.State.QUEUED, ChatRun.State.RUNNING):
            firing_over = _firing_over(run)
            if run.state != ChatRun.State.RUNNING or firing_over:
                chat_run_finish(run, state=ChatRun.State.STOPPED, text=firing_over or "", reply_status="stopped")
            else:
                run.state = ChatRun.State.STOPPING
                run.save(update_fields=["state", "updated_at"])
                publish_run_event(
                    workflow_id=workflow.pk,
                    run_id=run.pk,
                    event=run_stopping_event(workflow_id=workflow.pk, state=run.state),
                )
    return run


def _firing_over(run: ChatRun) -> str | None:
    """The final text of the run's firing when it already ended, else None."""
    outcome = firing_outcome(firing_id=run.firing_id) if run.firing_id else None
    if outcome is None or not outcome.ended:
        return None
    return outcome.final_text


def _run_pk(run_id) -> int:
    try:
        return int(run_id)
    except (TypeError, ValueError):
        raise refuse("not_found") from None


# --- finish -------------------------------------------------------------------------------------------------


def chat_run_finish(
    run: ChatRun,
    *,
    state: str,
    text: str = "",
    reply_status: str = "complete",
    error_code: str = "",
    error_message: str = "",
) -> ChatRun:
    """End a locked, active run: save the reply beside the user's message, settle the notes, announce it on commit.

    Idempotent: an ended run is returned unchanged (the runtime's `ended` hook and the chat watchdog may both
    come)."""
    if not run.is_active:
        return run
    session = chat_session_for_update(session_id=run.session_id)
    seq, streamed = run_stream_state(run.pk)
    meta = {"error_code": error_code} if error_code else {}
    if state == ChatRun.State.ERROR and not text and streamed:
        # The answer broke off (its worker died: `interrupted`) after the owner watched part of it arrive: the reply
        # keeps what they saw, marked as cut short. Only the chat's copy: the stored conversation keeps nothing of
        # it (the step is `ambiguous`, and what the model said is never replayed to it).
        text = streamed
        meta["partial"] = True
    reply = ChatMessage.objects.create(
        session=session,
        parent_id=run.user_message_id,
        role=ChatMessage.Role.ASSISTANT,
        kind=ChatMessage.Kind.RETRY if run.kind == ChatRun.Kind.REGENERATE else ChatMessage.Kind.ANSWER,
        text=text,
        status=reply_status,
        generation=run.generation,
        meta=meta,
    )

    run.state = state
    run.reply_message = reply
    run.outcome = {"finished": "answered", "stopped": "stopped"}.get(state, "error")
    run.error_code = error_code
    run.error_message = error_message[:2000]
    run.finished_at = timezone.now()
    run.seq = seq  # the last delta's seq; the end event takes the next one when it is sent
    run.save(
        update_fields=[
            "state",
            "reply_message",
            "outcome",
            "error_code",
            "error_message",
            "finished_at",
            "seq",
            "updated_at",
        ]
    )
    chat_notes_settle(run=run, told=state == ChatRun.State.FINISHED or _turn_saved(run))
    if session.active_leaf_id == run.user_message_id:
        chat_session_bump(session, leaf=reply)
    else:
        chat_session_bump(session)
    workflow_id = session.workflow_id
    event = run_ended_event(
        workflow_id=workflow_id,
        state=state,
        outcome=run.outcome,
        reply_message_id=reply.pk,
        status=reply_status,
        revision=session.revision,
        code=error_code,
    )
    # The streamed text goes first (the reply is saved), so a client that sees the end finds no copy left in Redis.
    transaction.on_commit(lambda: forget_run_stream(run.pk))
    publish_run_event(workflow_id=workflow_id, run_id=run.pk, event=event)
    logger.info(
        "chat run ended",
        extra={"run_id": run.pk, "state": state, "error_code": error_code, "workflow_id": workflow_id},
    )
    return run


def _turn_saved(run: ChatRun) -> bool:
    """Whether the run's firing saved a turn (its user message, notes included, is in the stored conversation):
    a stopped answer keeps what arrived, so the agent heard the notes even though the owner stopped it."""
    return bool(run.firing_id) and firing_saved_a_turn(firing_id=run.firing_id)


def chat_run_finish_from_firing(run: ChatRun, outcome: FiringOutcome) -> ChatRun:
    """Map the answering firing's end (its `FiringOutcome`) onto the locked run (run progress and the watchdog)."""
    if outcome.state == "finished":
        return chat_run_finish(run, state=ChatRun.State.FINISHED, text=outcome.final_text)
    if outcome.state == "stopped":
        return chat_run_finish(run, state=ChatRun.State.STOPPED, text=outcome.final_text, reply_status="stopped")
    return chat_run_finish(
        run,
        state=ChatRun.State.ERROR,
        text=outcome.final_text,
        reply_status="error",
        error_code=outcome.error_code or "failed",
        error_message=outcome.error_message,
    )
