from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "conversations"

    def ready(self) -> None:
        from workflows.listeners import register_archive_listener, register_reset_listener

        from .listeners import archive_conversations, reset_conversations

        register_reset_listener(reset_conversations, name="conversations")
        register_archive_listener(archive_conversations, name="conversations")
