import logging
import os

from celery import Celery
from celery.signals import after_setup_logger, task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")

app = Celery("opencompany")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _recycle_broken_connections(**_kwargs) -> None:
    # Workers keep their database connections across tasks (CELERY_DB_REUSE_MAX; a new PostgreSQL connection per
    # task cost more than the task). Like a web request, a task starts by dropping a connection that errored or
    # aged out, and the health check then runs before its first query, so a PostgreSQL restart heals by itself.
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:  # a task run inside a caller's transaction (tests) keeps it
            connection.close_if_unusable_or_obsolete()


@after_setup_logger.connect
def _quiet_periodic_tasks(logger=None, **_kwargs) -> None:
    from django.conf import settings

    from opencompany.logfmt import QuietPeriodicTasks

    names = [entry["task"] for entry in getattr(settings, "CELERY_BEAT_SCHEDULE", {}).values()]
    quiet = QuietPeriodicTasks(names)
    for handler in (logger or logging.getLogger()).handlers:
        handler.addFilter(quiet)
