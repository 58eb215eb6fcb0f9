from django.apps import AppConfig


class FilesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "files"

    def ready(self) -> None:
        from conversations.selectors import file_references
        from core.queueing import register_task
        from providers.files import register_file_reader

        from . import tasks
        from .references import register_file_reference_source
        from .storage import file_bytes_read

        # Adapters (below this app) read an attached file's bytes by its hash while they build a request.
        register_file_reader(file_bytes_read)
        register_task(tasks.sweep_orphans)
        register_file_reference_source(file_references, name="conversations")
