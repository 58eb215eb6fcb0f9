"""Health endpoints for load balancers and orchestrators (docs/deploy.md says which to use for what).

- `GET /healthz/live`: the process answers. No dependency is touched, so a database outage never gets a healthy
  web process restarted (use it as the liveness probe).
- `GET /healthz/ready`: PostgreSQL, Redis, and a worker heartbeat per Celery queue (`agent` and `housekeeping`
  separately), each check bounded so the answer comes within HEALTH_CHECK_TIMEOUT_SECONDS (under 2 s); 503 names
  what failed (use it as the readiness probe and the load balancer's check). The database check opens a fresh
  connection, not one from the pool: a PostgreSQL in a smart shutdown keeps serving the sessions it has while it
  refuses new ones, so a pooled check would call a server healthy that no new process can reach.
- `GET /healthz`: the older combined check (database, Redis, any worker); kept for `dev.py` and existing monitors.

Each check names only the component and a short reason; connection strings and hosts never appear, because these
endpoints are public.
"""

from __future__ import annotations

import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

# Checks run on these threads so a hung dependency costs the probe its deadline, not the pool's own timeout.
_checks = ThreadPoolExecutor(max_workers=4, thread_name_prefix="healthz")


def _check_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("select 1")
            cursor.fetchone()
        return {"ok": True}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}


def _check_database_fresh() -> dict:
    """A new connection (outside the pool) and one query, bounded by the probe's budget."""
    import psycopg

    params = connection.get_connection_params()  # the pool's options are not among them
    params["connect_timeout"] = max(2, math.ceil(settings.HEALTH_CHECK_TIMEOUT_SECONDS))  # libpq's least is 2 s
    try:
        with psycopg.connect(**params, autocommit=True) as fresh:
            fresh.execute("select 1").fetchone()
        return {"ok": True}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}


def _redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)


def _check_redis() -> dict:
    try:
        _redis_client().ping()
        return {"ok": True}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}


def _heartbeat_age(key: str) -> dict:
    try:
        raw = _redis_client().get(key)
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    if raw is None:
        return {"ok": False, "error": "no worker heartbeat"}
    age = max(0.0, time.time() - float(raw))
    return {"ok": age <= settings.CELERY_WORKER_HEARTBEAT_TTL, "last_heartbeat_seconds_ago": round(age, 1)}


health_logger = logging.getLogger("core.health")


def _check_worker(redis_ok: bool) -> dict:
    if not redis_ok:
        return {"ok": False, "error": "redis unavailable"}
    return _heartbeat_age(settings.CELERY_WORKER_HEARTBEAT_KEY)


def queue_heartbeat_key(queue: str) -> str:
    return f"{settings.CELERY_WORKER_HEARTBEAT_KEY}:{queue}"


def _check_queues() -> dict:
    return {
        f"worker_{queue}": _heartbeat_age(queue_heartbeat_key(queue))
        for queue in (settings.CELERY_QUEUE_AGENT, settings.CELERY_QUEUE_HOUSEKEEPING)
    }


def _answer(components: dict) -> JsonResponse:
    failing = [name for name, c in components.items() if not c["ok"]]
    body = {"status": "unavailable" if failing else "ok", "failing": failing, **components}
    response = JsonResponse(body, status=503 if failing else 200)
    if failing:
        response["Retry-After"] = str(settings.UNAVAILABLE_RETRY_AFTER_SECONDS)
        # Not Django's "ERROR Service Unavailable" line: a 503 while the worker starts is the normal start-up, and
        # a probe asks every few seconds. A missing database or Redis is worth a warning.
        response._has_been_logged = True
        only_workers = all(name.startswith("worker") for name in failing)
        health_logger.log(
            logging.INFO if only_workers else logging.WARNING,
            "healthz unavailable",
            extra={"failing": ",".join(failing)},
        )
    return response


@never_cache
@require_GET
def healthz(request):
    database = _check_database()
    redis_status = _check_redis()
    return _answer({"database": database, "redis": redis_status, "worker": _check_worker(redis_status["ok"])})


@never_cache
@require_GET
def live(request):
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def ready(request):
    deadline = time.monotonic() + settings.HEALTH_CHECK_TIMEOUT_SECONDS
    futures = {
        "database": _checks.submit(_check_database_fresh),
        "redis": _checks.submit(_check_redis),
        "queues": _checks.submit(_check_queues),
    }
    results: dict = {}
    for name, future in futures.items():
        try:
            results[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            results[name] = {"ok": False, "error": "timeout"}
    components = {"database": results["database"], "redis": results["redis"]}
    queues = results["queues"]
    if "ok" in queues:  # the whole queue check timed out
        queues = {f"worker_{q}": queues for q in (settings.CELERY_QUEUE_AGENT, settings.CELERY_QUEUE_HOUSEKEEPING)}
    components.update(queues)
    return _answer(components)
