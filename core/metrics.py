"""Prometheus metrics at `GET /metrics` (docs/deploy.md lists them and who may read them).

Request latency is measured in the web process that answers (a histogram per process: scrape every web process).
Everything else is read at scrape time from the stores every process shares, PostgreSQL and Redis, so Celery's
prefork children need no multiprocess registry and any one web process gives the whole picture: queue depth per
Celery queue (the broker's Redis lists) here, and the series each app reads from its own tables, handed over at
start-up with `register_metrics_source` (firings: agents/metrics.py; tokens and cost: conversations/metrics.py; chat
turn latency: chat/metrics.py).

Who may read it: a staff user's session, or `Authorization: Bearer <METRICS_TOKEN>` when that setting is set (for
the Prometheus scraper). Anyone else gets a 404, so the endpoint does not advertise itself.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Iterable

from django.conf import settings
from django.http import Http404, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

REQUEST_SECONDS = Histogram(
    "opencompany_http_request_duration_seconds",
    "Time to answer an HTTP request in this web process.",
    ["method", "route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


def _route(request) -> str:
    # The URL pattern, never the concrete path: ids in paths would make a label value per workflow.
    match = getattr(request, "resolver_match", None)
    return match.route if match is not None and match.route else "unmatched"


class RequestMetricsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        REQUEST_SECONDS.labels(request.method, _route(request), str(response.status_code)).observe(
            time.perf_counter() - started
        )
        return response


def _queue_lengths() -> dict[str, int]:
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=1, socket_timeout=1)
    lengths = {}
    for queue in (settings.CELERY_QUEUE_AGENT, settings.CELERY_QUEUE_HOUSEKEEPING):
        # kombu's Redis transport keeps a list per queue and priority step ("agent", "agent\x06\x163", ...).
        keys = [queue, *(f"{queue}\x06\x16{step}" for step in (1, 2, 3, 4, 5, 6, 7, 8, 9))]
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.llen(key)
            lengths[queue] = sum(pipe.execute())
    return lengths


MetricsSource = Callable[[], Iterable[Metric]]
_sources: list[MetricsSource] = []


def register_metrics_source(source: MetricsSource) -> None:
    """An app hands over the series it reads from its own tables (called from its AppConfig.ready())."""
    if source not in _sources:
        _sources.append(source)


def quantile_gauge(name: str, documentation: str, seconds: list[float]) -> GaugeMetricFamily:
    """The 0.5, 0.9 and 0.99 quantiles of sorted durations (0 when there are none)."""
    gauge = GaugeMetricFamily(name, documentation, labels=["quantile"])
    for quantile in (0.5, 0.9, 0.99):
        gauge.add_metric(
            [str(quantile)], seconds[min(len(seconds) - 1, int(quantile * len(seconds)))] if seconds else 0
        )
    return gauge


def _queue_metrics() -> Iterable[Metric]:
    queue = GaugeMetricFamily("opencompany_celery_queue_length", "Tasks waiting in a Celery queue.", labels=["queue"])
    for name, length in _queue_lengths().items():
        queue.add_metric([name], length)
    yield queue


class SharedStateCollector:
    """Read at scrape time from PostgreSQL and Redis (see the module docstring): the broker's queues here, the rest
    from the sources the apps registered."""

    def collect(self):
        yield from _queue_metrics()
        for source in _sources:
            yield from source()


def _allowed(request) -> bool:
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), token.encode()):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_staff)


@never_cache
@require_GET
def metrics_view(request):
    if not _allowed(request):
        raise Http404
    from prometheus_client import REGISTRY

    registry = CollectorRegistry()
    registry.register(SharedStateCollector())
    body = generate_latest(REGISTRY) + generate_latest(registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
