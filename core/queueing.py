"""Send a Celery task by name from a module below the one that defines it.

Tasks call services; a service that also imported its tasks module to enqueue one would close a circle (services ->
tasks -> services). So each app registers the tasks its services send in `AppConfig.ready()`, as it registers
observers and listeners, and the services enqueue them by name. The registered task object is used (not
`send_task`), so `task_always_eager` and the task's own routing options apply as if it had been called directly.
"""

from __future__ import annotations

_tasks: dict = {}


def register_task(task) -> None:
    """Make `task` (a Celery task) sendable by its name."""
    _tasks[task.name] = task


def enqueue_task(name: str, *, args=(), kwargs=None, **options):
    """`apply_async` of the task registered under `name`; a name nobody registered is a programming error."""
    try:
        task = _tasks[name]
    except KeyError:
        raise LookupError(f"no task registered as {name!r} (register it in its app's AppConfig.ready)") from None
    return task.apply_async(args=list(args), kwargs=kwargs or {}, **options)
