import logging
import os
import threading
import time

from celery import Celery
from celery.signals import after_setup_logger, task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")

app = Celery("opencompany")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# When a worker's connection last ended a task clean (per thread: the pool's threads each hold their own).
_clean_since = threading.local()
# How long a connection left clean by the previous task goes on to the next one unchecked. The pool checks a
# connection when it is taken (a round trip before the task's first statement), which is for one that sat idle; a
# busy worker's tasks come back to back, and a firing's first step paid that round trip every turn.
CONNECTION_FRESH_SECONDS = 1.0


@task_prerun.connect
def connections_at_task_start(**_kwargs) -> None:
    """Like a web request, a task starts by dropping a connection that errored or aged out; the pool then checks the
    one it hands out before the first query, so a PostgreSQL restart heals by itself. A connection the previous task
    ended with moments ago, clean, is kept as it is (CONNECTION_FRESH_SECONDS)."""
    from django.db import connections

    now = time.monotonic()
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:  # a task run inside a caller's transaction (tests) keeps it
            continue
        clean_since = getattr(_clean_since, connection.alias, None)
        if clean_since is not None and now - clean_since < CONNECTION_FRESH_SECONDS and _is_clean(connection):
            continue
        connection.close_if_unusable_or_obsolete()


@task_postrun.connect
def connections_at_task_end(**_kwargs) -> None:
    """Keep a connection the task leaves clean for the next task (see above); hand any other back."""
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        if _is_clean(connection):
            setattr(_clean_since, connection.alias, time.monotonic())
        else:
            setattr(_clean_since, connection.alias, None)
            connection.close_if_unusable_or_obsolete()


def _is_clean(connection) -> bool:
    return (
        connection.connection is not None
        and not connection.errors_occurred
        and not connection.connection.broken
        and connection.get_autocommit() == connection.settings_dict["AUTOCOMMIT"]
    )


@after_setup_logger.connect
def _quiet_periodic_tasks(logger=None, **_kwargs) -> None:
    from django.conf import settings

    from core.logfmt import QuietPeriodicTasks

    names = [entry["task"] for entry in getattr(settings, "CELERY_BEAT_SCHEDULE", {}).values()]
    quiet = QuietPeriodicTasks(names)
    for handler in (logger or logging.getLogger()).handlers:
        handler.addFilter(quiet)
