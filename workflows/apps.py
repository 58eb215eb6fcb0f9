from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workflows"

    def ready(self) -> None:
        from core.queueing import register_task
        from core.socket_access import register_workflow_access

        from .models import Workflow
        from .nodes import register_node_spec
        from .nodes.builtin import BUILTIN_SPECS
        from .selectors import access_workflow
        from .tasks import drain_archive_outbox

        for spec in BUILTIN_SPECS:
            register_node_spec(spec)
        register_task(drain_archive_outbox)
        register_workflow_access(check=access_workflow, workflow_model=Workflow)
