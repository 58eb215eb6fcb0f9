import logging
import threading
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


logger = logging.getLogger(__name__)


def record_queue_heartbeats(queues: list[str]) -> None:
    from core.health import queue_heartbeat_key

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    now, ttl = str(time.time()), settings.CELERY_WORKER_HEARTBEAT_TTL * 2
    with client.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.set(queue_heartbeat_key(queue), now, ex=ttl)
        pipe.set(settings.CELERY_WORKER_HEARTBEAT_KEY, now, ex=ttl)
        pipe.execute()


def _consumed_queues(consumer) -> list[str]:
    try:
        return sorted(consumer.app.amqp.queues.consume_from)
    except Exception:
        return [settings.CELERY_TASK_DEFAULT_QUEUE]


def _queue_heartbeat_loop(queues: list[str], stop: threading.Event) -> None:
    failing = False
    while not stop.is_set():
        try:
            record_queue_heartbeats(queues)
            failing = False
        except Exception as exc:
            if not failing:  # logged once per outage; the next beat after Redis returns heals it
                logger.warning("queue heartbeat failed queues=%s error=%s", ",".join(queues), type(exc).__name__)
            failing = True
        stop.wait(settings.CELERY_WORKER_HEARTBEAT_INTERVAL)


_heartbeat_stop = threading.Event()


@worker_ready.connect
def _heartbeat_on_ready(sender=None, **_kwargs) -> None:
    # /healthz should turn green as soon as a worker can take tasks, not after the first beat; and each queue gets
    # its own heartbeat from the workers that consume it, independent of whether beat runs.
    record_worker_heartbeat()
    queues = _consumed_queues(sender)
    threading.Thread(
        target=_queue_heartbeat_loop, args=(queues, _heartbeat_stop), name="queue-heartbeat", daemon=True
    ).start()


@shared_task(name="opencompany.purge_idempotency_receipts", ignore_result=True)
def purge_idempotency_receipts() -> int:
    from datetime import timedelta

    from django.utils import timezone

    from core.models import IdempotencyReceipt

    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_RECEIPT_TTL_HOURS)
    deleted, _ = IdempotencyReceipt.objects.filter(created_at__lt=cutoff).delete()
    return deleted
