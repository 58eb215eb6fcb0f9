"""Feedback: the owner rates an answer good or bad, and the agent hears of it before the next message."""

from __future__ import annotations

from django.db import transaction

from chat.errors import refuse
from chat.events import publish_chat_updated
from chat.models import ChatFeedback, ChatMessage
from chat.services.notes import chat_note_drop, chat_note_put, note_line
from chat.services.runs import chat_session_bump, chat_session_lock, session_message

# How much of the rated answer the note quotes, so the agent knows which answer the owner meant.
FEEDBACK_ANSWER_CHARS = 300


def chat_feedback_set(*, workflow, message_id, rating: str | None) -> ChatFeedback | None:
    """Rate an answer good or bad (None takes the rating back). The agent hears of it before the next message."""
    if rating not in (None, "", ChatFeedback.Rating.GOOD, ChatFeedback.Rating.BAD):
        raise refuse("invalid_request", "A rating is good, bad, or empty to take it back.")
    with transaction.atomic():
        session = chat_session_lock(workflow=workflow)
        message = session_message(session, message_id)
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
            chat_note_put(
                session=session,
                key=key,
                text=note_line("feedback", {"rating": rating, "answer": _quoted(message.text)}),
            )
        chat_session_bump(session)
        publish_chat_updated(workflow_id=workflow.pk, revision=session.revision, reason="feedback")
    return feedback


def _quoted(answer: str) -> str:
    return answer if len(answer) <= FEEDBACK_ANSWER_CHARS else answer[:FEEDBACK_ANSWER_CHARS] + "…"
