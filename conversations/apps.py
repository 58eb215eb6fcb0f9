from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "conversations"

    def ready(self) -> None:
        from core.metrics import register_metrics_source
        from workflows.listeners import register_archive_listener, register_reset_listener

        from .listeners import archive_conversations, reset_conversations
        from .metrics import usage_metrics

        register_reset_listener(reset_conversations, name="conversations")
        register_archive_listener(archive_conversations, name="conversations")
        register_metrics_source(usage_metrics)
