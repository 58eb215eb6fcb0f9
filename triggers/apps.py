from django.apps import AppConfig


class TriggersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "triggers"

    def ready(self) -> None:
        from core.metrics import register_metrics_source
        from core.queueing import register_task
        from workflows.listeners import (
            register_generation_end_listener,
            register_generation_start_listener,
            register_reset_listener,
        )
        from workflows.nodes import register_node_spec

        from .metrics import trigger_metrics
        from .nodes import SCHEDULE_TRIGGER, WEBHOOK_TRIGGER
        from .services import schedules_on_generation_end, schedules_on_generation_start, schedules_on_reset
        from .tasks import fire_deliver, schedules_sweep_task

        register_node_spec(SCHEDULE_TRIGGER)
        register_node_spec(WEBHOOK_TRIGGER)
        register_generation_start_listener(schedules_on_generation_start, name="triggers")
        register_generation_end_listener(schedules_on_generation_end, name="triggers")
        register_reset_listener(schedules_on_reset, name="triggers")
        register_task(fire_deliver)
        register_task(schedules_sweep_task)
        register_metrics_source(trigger_metrics)
