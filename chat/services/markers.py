"""Marks in the thread where the answering agent's conversation changed without a message: its context was
cleared, or older turns were compacted into a summary."""

from __future__ import annotations

import hashlib

from django.db import transaction

from chat.events import publish_chat_updated
from chat.locks import chat_session_for_update
from chat.models import ChatMarker, ChatMessage, ChatRun
from chat.services.notes import chat_notes_drop_untold
from chat.services.runs import answering_agent_of, chat_session_bump


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
