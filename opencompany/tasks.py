import time

import redis
from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings


def record_worker_heartbeat() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    client.set(settings.CELERY_WORKER_HEARTBEAT_KEY, str(time.time()), ex=settings.CELERY_WORKER_HEARTBEAT_TTL * 2)


@shared_task(name="opencompany.worker_heartbeat", ignore_result=True)
def worker_heartbeat() -> None:
    record_worker_heartbeat()


@shared_task(name="opencompany.ping")
def ping(value: str) -> str:
    return f"pong:{value}"


@worker_ready.connect
def _heartbeat_on_ready(**_kwargs) -> None:
    # /healthz should turn green as soon as a worker can take tasks, not after the first beat.
    record_worker_heartbeat()
