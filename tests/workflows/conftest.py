import pytest

from opencompany.celery import app as celery_app
from workflows.listeners import archive_listeners, register_archive_listener, unregister_archive_listener


@pytest.fixture
def eager_celery():
    """Run tasks enqueued on commit in-process, so the outbox drain is observable in the test."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = previous


@pytest.fixture
def archive_calls():
    """Record every archive listener call (added beside whatever other apps registered)."""
    calls = []

    def record(**kwargs):
        calls.append(kwargs)
        return len(calls)

    register_archive_listener(record, name="tests.record")
    assert "tests.record" in archive_listeners()
    yield calls
    unregister_archive_listener("tests.record")


@pytest.fixture
def create_workflow(owner):
    from workflows.services import workflow_create

    def make(graph=None, *, name="Test workflow", user=None):
        return workflow_create(owner=user or owner, name=name, graph=graph).workflow

    return make
