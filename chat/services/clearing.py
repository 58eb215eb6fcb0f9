"""Emptying the thread: the owner's Clear chat, and the chat's part of a Workflow Reset."""

from __future__ import annotations

from django.db import transaction

from agents.services.firings import firing_request_stop
from chat.events import publish_chat_updated
from chat.locks import chat_runs_active_for_update, chat_session_for_update
from chat.models import ChatMessage, ChatRun, ChatSession
from chat.services.runs import chat_run_finish, chat_session_bump, chat_session_lock, check_lane
from conversations.store import clear_conversation
from workflows.selectors import workflow_live_generation


def chat_clear(*, workflow) -> dict:
    """Clear chat: messages, runs, snapshots, notes and feedback go, and the agents forget the conversation."""

    with transaction.atomic():
        session = chat_session_lock(workflow=workflow)
        check_lane(session)
        counts = _clear_thread(session)
        # Read from the row: the caller's `workflow` may predate a start or reset.
        generation = workflow_live_generation(workflow_id=workflow.pk)
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
