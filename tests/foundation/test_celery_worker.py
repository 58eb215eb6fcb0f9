import pytest
from celery.backends.redis import RedisBackend
from celery.result import AsyncResult

from core.tasks import ping
from opencompany.celery import app
from tests.processes import start_celery_worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_real_worker_process_runs_a_task_through_the_broker(tmp_path, settings):
    # Results are not kept in production; this test reads one back through Redis on purpose.
    backend = RedisBackend(app=app, url=settings.REDIS_URL)
    worker = start_celery_worker(tmp_path, queues="housekeeping", CELERY_RESULT_BACKEND=settings.REDIS_URL)
    try:
        sent = ping.apply_async(args=["hello"], queue="housekeeping", ignore_result=False)
        assert AsyncResult(sent.id, backend=backend, app=app).get(timeout=30) == "pong:hello"
        assert "opencompany.ping" in worker.log()  # it ran in that process, not in this one
    finally:
        worker.stop()
