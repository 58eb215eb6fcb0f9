"""`GET /healthz`: is the database, Redis and at least one Celery worker up?

Each check names only the component and a short reason; connection strings and hosts never
appear, because this endpoint is public for load balancers.
"""

import logging
import time

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _check_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("select 1")
            cursor.fetchone()
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


def _check_worker(redis_ok: bool) -> dict:
    if not redis_ok:
        return {"ok": False, "error": "redis unavailable"}
    try:
        raw = _redis_client().get(settings.CELERY_WORKER_HEARTBEAT_KEY)
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    if raw is None:
        return {"ok": False, "error": "no worker heartbeat"}
    age = max(0.0, time.time() - float(raw))
    return {"ok": age <= settings.CELERY_WORKER_HEARTBEAT_TTL, "last_heartbeat_seconds_ago": round(age, 1)}


health_logger = logging.getLogger("opencompany.health")


@never_cache
@require_GET
def healthz(request):
    database = _check_database()
    redis_status = _check_redis()
    worker = _check_worker(redis_status["ok"])
    components = {"database": database, "redis": redis_status, "worker": worker}
    healthy = all(c["ok"] for c in components.values())
    failing = [name for name, c in components.items() if not c["ok"]]
    body = {"status": "ok" if healthy else "unavailable", "failing": failing, **components}
    response = JsonResponse(body, status=200 if healthy else 503)
    if not healthy:
        # Not Django's "ERROR Service Unavailable" line: a 503 while the worker starts is the normal start-up, and
        # a probe asks every few seconds. A missing database or Redis is worth a warning.
        response._has_been_logged = True
        level = logging.INFO if failing == ["worker"] else logging.WARNING
        health_logger.log(level, "healthz unavailable", extra={"failing": ",".join(failing)})
    return response
