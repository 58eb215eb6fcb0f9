from django.apps import AppConfig


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"

    def ready(self) -> None:
        from celery.signals import worker_shutting_down

        from workflows.listeners import register_reset_listener

        from .dispatch import mark_worker_stopping
        from .listeners import end_firings_on_reset

        register_reset_listener(end_firings_on_reset, name="agents")
        worker_shutting_down.connect(mark_worker_stopping, weak=False, dispatch_uid="agents.worker_stopping")
