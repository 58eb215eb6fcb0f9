"""The owner changed the answering agent's memory outside the chat (the Memory panel): the agent is told."""

from __future__ import annotations

from chat.models import ChatSession
from chat.services.notes import chat_note_put, note_line


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
