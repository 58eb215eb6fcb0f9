from django.apps import AppConfig


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"

    def ready(self) -> None:
        from workflows.listeners import register_reset_listener

        from .listeners import end_firings_on_reset

        register_reset_listener(end_firings_on_reset, name="agents")
