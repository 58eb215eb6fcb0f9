"""A worker's database connection between tasks: kept, unchecked, only while it is clean and was used moments ago.

The pool checks a connection when it hands it out (a round trip before a task's first statement); a busy worker's
tasks come back to back, so the connection the previous task left clean goes on to the next one as it is.
`requests_num` in the pool's stats counts connections handed out, so each test sees whether the next task took
(and checked) one.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

from opencompany import celery as worker_signals

pytestmark = pytest.mark.django_db(transaction=True)


def _handed_out() -> int:
    return connection.pool.get_stats()["requests_num"]


def _one_task(sql: str = "SELECT 1") -> None:
    worker_signals.connections_at_task_start()
    with connection.cursor() as cursor:
        cursor.execute(sql)
    worker_signals.connections_at_task_end()


def test_the_next_task_right_after_a_clean_one_keeps_the_connection_unchecked():
    assert connection.pool is not None, "the worker settings pool their connections"
    _one_task()
    held, before = connection.connection, _handed_out()
    _one_task()
    assert connection.connection is held
    assert _handed_out() == before


def test_a_connection_idle_past_the_window_is_handed_back_and_checked(monkeypatch):
    _one_task()
    before = _handed_out()
    monkeypatch.setattr(worker_signals, "CONNECTION_FRESH_SECONDS", 0.0)  # every gap is now longer than the window
    _one_task()
    assert _handed_out() == before + 1


def test_a_connection_that_saw_an_error_is_handed_back():
    _one_task()
    with pytest.raises(DatabaseError):
        _one_task("SELECT * FROM no_such_table_here")
    worker_signals.connections_at_task_end()  # the failed task's postrun
    before = _handed_out()
    _one_task()
    assert _handed_out() == before + 1
    assert not connection.errors_occurred
