"""Row locks of the chat. Every `select_for_update` of a chat row goes through here.

Place in the lock order (docs/architecture.md#lock-order): **3** the chat run, **4** the chat session, **5** the
rows under a session (notes, messages), all after the firing row (the runtime's hooks run under it) and before any
conversation header. A service that has no firing locks the session and then the rows under it; it never locks a
firing while holding a run or the session (Stop asks the firing to stop before it locks the run). The one
exception is Workflow Reset (docs/architecture.md#reset-deadlock).

Sessions and runs are locked `FOR NO KEY UPDATE` (`no_key=True`): messages, runs, notes and run steps only
reference them, and every writer of those children holds the parent's lock already, so a foreign-key check need
not queue behind it. Notes and messages are updated in place, never re-keyed, and are locked the same way.
"""

from __future__ import annotations

from .models import ChatMessage, ChatNote, ChatRun, ChatSession


def chat_run_for_update(run_id) -> ChatRun | None:
    """The run row, locked (lock 3); None when it is gone."""
    return ChatRun.objects.select_for_update(no_key=True).filter(pk=run_id).first()


def chat_run_with_message_for_update(run_id) -> ChatRun | None:
    """The run row, locked (lock 3), with its user message read in the same statement (not locked); None when gone."""
    rows = ChatRun.objects.select_for_update(no_key=True, of=("self",)).select_related("user_message")
    return rows.filter(pk=run_id).first()


def chat_runs_active_for_update(*, session) -> list[ChatRun]:
    """The session's active runs, locked in id order. Only Workflow Reset takes runs after their session."""
    rows = ChatRun.objects.select_for_update(no_key=True).filter(session=session, state__in=ChatRun.ACTIVE_STATES)
    return list(rows.order_by("pk"))


def chat_session_for_update(*, workflow=None, session_id=None) -> ChatSession | None:
    """The workflow's chat session (or the session `session_id`), locked (lock 4); None when there is none."""
    rows = ChatSession.objects.select_for_update(no_key=True)
    return rows.filter(pk=session_id).first() if session_id is not None else rows.filter(workflow=workflow).first()


def chat_notes_untold_for_update(*, session_id) -> list[ChatNote]:
    """The session's untold notes, locked (lock 5): prepare claims them for its run."""
    rows = ChatNote.objects.select_for_update(no_key=True).filter(session_id=session_id, told_at__isnull=True)
    return list(rows.order_by("pk"))


def chat_note_get_or_create_for_update(*, session, key: str, text: str) -> tuple[ChatNote, bool]:
    """The note `key` of the session, locked (lock 5), created with `text` when missing."""
    return ChatNote.objects.select_for_update(no_key=True).get_or_create(
        session=session, key=key, defaults={"text": text}
    )


def chat_message_for_update(message_id) -> ChatMessage:
    """One message row, locked (lock 5), under its session's lock (a branch move records its last leaf on it)."""
    return ChatMessage.objects.select_for_update(no_key=True).get(pk=message_id)
