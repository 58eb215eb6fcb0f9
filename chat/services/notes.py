"""Notes to the agent (docs/chat.md#notes): what the owner did between turns, told as bracketed lines ahead of the
next message.

A note is keyed per session: a newer note replaces the one with the same key (and is untold again). The answering
agent's `agent.prepare_payload` claims the untold notes for its run; they are marked told once that run's turn (the
user message the notes were put ahead of) was saved in the agent's conversation — an answered run, and a stopped
or failed one whose turn was saved too. A run that ended before its turn was saved releases them for the next one.

Notes that no longer describe the conversation the agent is in are dropped: a rating of an answer on a branch the
owner left is not offered to a run on another branch, and a Clear context drops every untold note (the agent starts
fresh; what the owner did before the clear is about a conversation it no longer has).
"""

from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone

from chat.locks import chat_note_get_or_create_for_update, chat_notes_untold_for_update
from chat.models import ChatMessage, ChatNote, ChatRun, ChatSession

# Appended to the answering agent's system prompt. Byte-stable on purpose: the system prompt must not change from
# turn to turn (provider prompt caches, and the stored conversation's first message stays the same).
NOTES_GUIDE = (
    "\n\nNote from OpenCompany: a user message may begin with lines in square brackets, such as "
    '[feedback]{"rating": "bad"}[/feedback]. Those lines are written by OpenCompany, not by the owner: they '
    "report what the owner did in the chat since your last answer (a rating, a switch to another version of the "
    "conversation, an edit of your memory). Take them into account; do not quote them back."
)


def note_line(kind: str, payload: dict) -> str:
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return f"[{kind}]{body}[/{kind}]"


def chat_note_put(*, session: ChatSession, key: str, text: str) -> ChatNote:
    """Leave (or replace) the note `key`. A replaced note is offered again even if its older text was told."""
    with transaction.atomic():
        note, created = chat_note_get_or_create_for_update(session=session, key=key, text=text)
        if not created:
            note.text = text
            note.told_at = None
            note.claimed_by = None
            note.save(update_fields=["text", "told_at", "claimed_by", "updated_at"])
    return note


def chat_note_drop(*, session: ChatSession, key: str) -> int:
    """Withdraw an untold note (e.g. a rating taken back before the agent heard of it)."""
    deleted, _ = ChatNote.objects.filter(session=session, key=key, told_at__isnull=True).delete()
    return deleted


FEEDBACK_PREFIX = "feedback:"


def _path_to(message_id: int | None) -> set[int]:
    """The ids of `message_id` and every message above it (the conversation a run answers on)."""

    path: set[int] = set()
    node = message_id
    while node is not None and node not in path:
        path.add(node)
        node = ChatMessage.objects.filter(pk=node).values_list("parent_id", flat=True).first()
    return path


def _on_path(note: ChatNote, path: set[int]) -> bool:
    """A rating speaks about one answer: only an answer on the run's path is part of what the agent remembers."""
    if not note.key.startswith(FEEDBACK_PREFIX):
        return True
    try:
        return int(note.key[len(FEEDBACK_PREFIX) :]) in path
    except ValueError:
        return True


def chat_notes_claim(*, run: ChatRun) -> str:
    """Inside prepare's transaction: claim the session's untold notes for `run`; returns the user prefix.

    A prepare delivered twice claims the same notes again (claimed_by=run), so the prefix is the same both times.
    A rating of an answer that is not on the run's path (a branch the owner left) is not offered; it stays untold,
    so it reaches the agent if the owner switches back to that branch and writes there.
    """
    untold = chat_notes_untold_for_update(session_id=run.session_id)
    if any(n.key.startswith(FEEDBACK_PREFIX) for n in untold):
        path = _path_to(run.user_message_id)
        untold = [n for n in untold if _on_path(n, path)]
    busy = set(
        ChatRun.objects.filter(
            pk__in={n.claimed_by_id for n in untold if n.claimed_by_id}, state__in=ChatRun.ACTIVE_STATES
        )
        .exclude(pk=run.pk)
        .values_list("pk", flat=True)
    )
    chosen = sorted((n for n in untold if n.claimed_by_id not in busy), key=lambda n: n.pk)
    if not chosen:
        return ""
    ChatNote.objects.filter(pk__in=[n.pk for n in chosen]).update(claimed_by=run, updated_at=timezone.now())
    return "\n".join(n.text for n in chosen) + "\n\n"


def chat_notes_settle(*, run: ChatRun, told: bool) -> int:
    """Told when the run's turn was saved (the agent keeps the notes in its conversation); otherwise released, so
    the next run offers them again."""
    claimed = ChatNote.objects.filter(claimed_by=run, told_at__isnull=True)
    if told:
        return claimed.update(told_at=timezone.now(), updated_at=timezone.now())
    return claimed.update(claimed_by=None, updated_at=timezone.now())


def chat_notes_drop_untold(*, session: ChatSession) -> int:
    """The agent's context was cleared: what the owner did before is about a conversation the agent no longer has.
    Notes claimed by a run still in progress stay with it (that run settles them)."""
    active = ChatRun.objects.filter(session=session, state__in=ChatRun.ACTIVE_STATES)
    deleted, _ = ChatNote.objects.filter(session=session, told_at__isnull=True).exclude(claimed_by__in=active).delete()
    return deleted
