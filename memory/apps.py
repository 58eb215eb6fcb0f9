from django.apps import AppConfig


class MemoryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "memory"

    def ready(self) -> None:
        from core.queueing import register_task
        from workflows.nodes import register_node_spec

        from .node import SIMPLE_MEMORY
        from .tasks import embed_item

        register_task(embed_item)
        register_node_spec(SIMPLE_MEMORY)
