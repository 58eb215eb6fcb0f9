"""Feedback, Clear chat, and what the chat does when the workflow is reset or the owner edits memory."""

from __future__ import annotations

import hashlib
import logging

from django.db import transaction

from agents.services.firings import firing_request_stop
from chat.errors import refuse
from chat.events import publish_chat_updated
from chat.locks import chat_runs_active_for_update, chat_session_for_update
from chat.models import ChatFeedback, ChatMarker, ChatMessage, ChatRun, ChatSession
from chat.services.notes import chat_note_drop, chat_note_put, chat_notes_drop_untold, note_line
from chat.services.runs import answering_agent_of, chat_run_finish, chat_session_bump, chat_session_lock, check_lane
from conversations.store import clear_conversation

logger = logging.getLogger("chat.thread")

FEEDBACK_ANSWER_CHARS = 300


def chat_feedback_set(*, workflow, message_id, rating: str | None) -> ChatFeedback | None:
    """Rate an answer good or bad (None takes the rating back). The agent hears of it before the next message."""
    if rating not in (None, "", ChatFeedback.Rating.GOOD, ChatFeedback.Rating.BAD):
        raise refuse("invalid_request", "A rating is good, bad, or empty to take it back.")
    with transaction.atomic():
        session = chat_session_lock(workflow=workflow)
        try:
            message = ChatMessage.objects.filter(session=session, pk=int(message_id)).first()
        except (TypeError, ValueError):
            message = None
        if message is None:
            raise refuse("not_found")
        if message.role != ChatMessage.Role.ASSISTANT:
            raise refuse("not_editable", "Only answers can be rated.")
        key = f"feedback:{message.pk}"
        if not rating:
            ChatFeedback.objects.filter(message=message).delete()
            chat_note_drop(session=session, key=key)
            feedback = None
        else:
            feedback, _ = ChatFeedback.objects.update_or_create(
                message=message, defaults={"session": session, "rating": rating}
            )
            answer = message.text if len(message.text) <= FEEDBACK_ANSWER_CHARS else message.text[:300] + "…"
            chat_note_put(session=session, key=key, text=note_line("feedback", {"rating": rating, "answer": answer}))
        chat_session_bump(session)
        publish_chat_updated(workflow_id=workflow.pk, revision=session.revision, reason="feedback")
    return feedback


def chat_clear(*, workflow) -> dict:
    """Clear chat: messages, runs, snapshots, notes and feedback go, and the agents forget the conversation."""

    with transaction.atomic():
        session = chat_session_lock(workflow=workflow)
        check_lane(session)
        counts = _clear_thread(session)
        generation = workflow.__class__.objects.filter(pk=workflow.pk).values_list("live_generation", flat=True)[0]
        counts["conversations"] = clear_conversation(workflow, generation=generation) if generation else 0
        chat_session_bump(session, leaf=None)
        publish_chat_updated(workflow_id=workflow.pk, revision=session.revision, reason="clear")
    return counts


def _clear_thread(session: ChatSession) -> dict:
    session.active_leaf = None
    session.save(update_fields=["active_leaf", "updated_at"])
    counts = {
        "runs": ChatRun.objects.filter(session=session).delete()[0],
        "snapshots": session.snapshots.all().delete()[0],
        "notes": session.notes.all().delete()[0],
        "markers": session.markers.all().delete()[0],
        "feedback": session.feedback.all().delete()[0],
    }
    # Children point at parents with CASCADE; deleting the roots takes every message with it.
    counts["messages"] = ChatMessage.objects.filter(session=session).delete()[0]
    return counts


def chat_reset_listener(*, workflow, previous_generation, new_generation, actor=None) -> dict:
    """Workflow Reset: end live runs with code `reset` and clear the chat thread (inside the reset transaction).
    The reset itself clears the conversations. Idempotent: a retried reset finds nothing to end or clear."""

    session = chat_session_for_update(workflow=workflow)
    if session is None:
        return {"runs_ended": 0, "messages": 0}
    ended = 0
    for run in chat_runs_active_for_update(session=session):
        # The run ends first, so the firing's `ended` hook finds it over and leaves the `reset` code alone. This
        # takes ChatRun before Firing (the reverse of prepare); a rare deadlock with a concurrent prepare is
        # resolved by PostgreSQL aborting one side, and both the reset and prepare are safe to retry.
        chat_run_finish(run, state=ChatRun.State.ERROR, reply_status="error", error_code="reset")
        if run.firing_id:
            firing_request_stop(firing_id=run.firing_id)
        ended += 1
    counts = _clear_thread(session)
    chat_session_bump(session, leaf=None)
    publish_chat_updated(workflow_id=workflow.pk, revision=session.revision, reason="reset")
    return {"runs_ended": ended, "messages": counts["messages"]}


def chat_memory_edit_listener(edit) -> None:
    """The owner changed memory in the panel: tell the answering agent before the next message (ids, no content)."""
    session = ChatSession.objects.filter(workflow_id=edit.workflow_id).first()
    if session is None:
        return
    payload = {"operation": edit.operation, "memory_node": edit.memory_node_id}
    if edit.item_id is not None:
        payload["memory_id"] = edit.item_id
    if edit.version is not None:
        payload["version"] = edit.version
    payload["note"] = "The owner changed your memory outside this chat; recall it again if it matters."
    chat_note_put(session=session, key=edit.note_key, text=note_line("memory", payload))


def chat_context_cleared(*, workflow, agent_node_ids=None) -> ChatMarker | None:
    """The answering agent's context was cleared (the Context panel's Clear, or the admin's Clear context): drop
    the untold notes (they describe a conversation the agent no longer has) and mark the thread where it happened.
    A clear of other agents only (a teammate's) changes nothing the owner talks to."""

    with transaction.atomic():
        session = chat_session_for_update(workflow=workflow)
        if session is None:
            return None
        if agent_node_ids is not None:
            answering = answering_agent_of(workflow)
            if answering is None or answering not in set(agent_node_ids):
                return None
        chat_notes_drop_untold(session=session)
        if (
            session.active_leaf_id is not None
            and ChatMarker.objects.filter(
                session=session, after_message_id=session.active_leaf_id, kind=ChatMarker.Kind.CONTEXT_CLEARED
            ).exists()
        ):
            return None  # cleared twice with nothing said in between: one mark is enough
        marker = ChatMarker.objects.create(
            session=session, after_message_id=session.active_leaf_id, kind=ChatMarker.Kind.CONTEXT_CLEARED
        )
        chat_session_bump(session)
        publish_chat_updated(workflow_id=workflow.pk, revision=session.revision, reason="context_cleared")
    return marker


def chat_context_archive_listener(*, workflow_id, workflow=None, reason="", agent_node_ids=(), **_) -> int:
    """Archive listener: a Clear context (admin action or API) of the answering agent marks the chat."""
    if workflow is None or reason != "context_cleared":
        return 0
    return 1 if chat_context_cleared(workflow=workflow, agent_node_ids=list(agent_node_ids or ())) else 0


def chat_compaction_seen(*, run: ChatRun, stored_messages: list[dict]) -> ChatMarker | None:
    """Inside prepare's transaction: the conversation the agent is about to read begins with a compaction summary
    the chat has not marked yet — mark the thread before this run's message (older turns were summarized there)."""
    summary = next((m for m in stored_messages if (m.get("meta") or {}).get("compaction_summary")), None)
    if summary is None:
        return None
    text = "".join(b.get("text", "") for b in summary.get("blocks", []) if b.get("type") == "text")
    ref = hashlib.sha256(text.encode()).hexdigest()[:32]
    kind = ChatMarker.Kind.COMPACTED
    if ChatMarker.objects.filter(session_id=run.session_id, kind=kind, ref=ref).exists():
        return None
    after = ChatMessage.objects.filter(pk=run.user_message_id).values_list("parent_id", flat=True).first()
    return ChatMarker.objects.create(session_id=run.session_id, after_message_id=after, kind=kind, ref=ref)
