from django.apps import AppConfig


class ChatConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "chat"

    def ready(self) -> None:
        from agents.observers import register_firing_observer
        from conversations.services import register_context_cleared_listener
        from core.metrics import register_metrics_source
        from files.references import register_file_reference_source
        from memory.listeners import register_memory_edit_listener
        from workflows.listeners import register_archive_listener, register_reset_listener

        from .metrics import chat_turn_metrics
        from .observer import chat_observer
        from .services import (
            chat_context_archive_listener,
            chat_context_cleared,
            chat_memory_edit_listener,
            chat_reset_listener,
        )
        from .services.attachments import chat_file_references

        register_firing_observer(chat_observer)
        register_reset_listener(chat_reset_listener, name="chat")
        register_memory_edit_listener(chat_memory_edit_listener)
        register_archive_listener(chat_context_archive_listener, name="chat")
        register_context_cleared_listener(chat_context_cleared)
        register_metrics_source(chat_turn_metrics)
        register_file_reference_source(chat_file_references, name="chat")
