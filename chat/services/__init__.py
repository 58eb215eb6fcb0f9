"""Writes of the chat app. Import from here."""

from .branches import chat_message_edit, chat_message_regenerate, chat_message_switch
from .clearing import chat_clear, chat_reset_listener
from .feedback import chat_feedback_set
from .markers import chat_context_archive_listener, chat_context_cleared
from .memory_edits import chat_memory_edit_listener
from .notes import NOTES_GUIDE, chat_note_drop, chat_note_put, note_line
from .runs import chat_message_send, chat_run_finish, chat_run_finish_from_firing, chat_run_stop, chat_session_get

__all__ = [
    "NOTES_GUIDE",
    "chat_clear",
    "chat_context_archive_listener",
    "chat_context_cleared",
    "chat_feedback_set",
    "chat_memory_edit_listener",
    "chat_message_edit",
    "chat_message_regenerate",
    "chat_message_send",
    "chat_message_switch",
    "chat_note_drop",
    "chat_note_put",
    "chat_reset_listener",
    "chat_run_stop",
    "chat_session_get",
    "chat_run_finish",
    "chat_run_finish_from_firing",
    "note_line",
]
