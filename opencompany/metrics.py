"""Prometheus metrics at `GET /metrics` (docs/deploy.md lists them and who may read them).

Request latency is measured in the web process that answers (a histogram per process: scrape every web process).
Everything else is read at scrape time from the stores every process shares, PostgreSQL and Redis, so Celery's
prefork children need no multiprocess registry and any one web process gives the whole picture:
- queue depth per Celery queue (the broker's Redis lists),
- firings by state and end reason (the kept firing rows),
- tokens and cost by provider (the usage ledger, never pruned, so these are true counters),
- chat turn latency, send to saved, over the last METRICS_TURN_WINDOW_SECONDS (finished chat runs), and send to
  the first streamed text (the time each run's first delta went out, kept an hour in Redis by chat.events).

Who may read it: a staff user's session, or `Authorization: Bearer <METRICS_TOKEN>` when that setting is set (for
the Prometheus scraper). Anyone else gets a 404, so the endpoint does not advertise itself.
"""

from __future__ import annotations

import hmac
import time
from datetime import timedelta

from django.conf import settings
from django.http import Http404, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

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


class SharedStateCollector:
    """Read at scrape time from PostgreSQL and Redis (see the module docstring)."""

    def collect(self):
        from django.db.models import Count, Sum

        from agents.models import Firing
        from chat.models import ChatRun
        from conversations.models import UsageRecord

        queue = GaugeMetricFamily(
            "opencompany_celery_queue_length", "Tasks waiting in a Celery queue.", labels=["queue"]
        )
        for name, length in _queue_lengths().items():
            queue.add_metric([name], length)
        yield queue

        firings = GaugeMetricFamily(
            "opencompany_firings",
            "Firings kept (AGENT_FIRING_RETENTION_DAYS) by state and end reason; use delta() for outcomes over time.",
            labels=["state", "end_reason"],
        )
        for row in Firing.objects.values("state", "end_reason").annotate(n=Count("id")).order_by():
            firings.add_metric([row["state"], row["end_reason"] or ""], row["n"])
        yield firings

        tokens = CounterMetricFamily(
            "opencompany_provider_tokens", "Tokens billed by provider and kind.", labels=["provider", "kind"]
        )
        cost = CounterMetricFamily("opencompany_provider_cost", "Cost recorded by provider (USD).", labels=["provider"])
        totals = UsageRecord.objects.values("provider").annotate(
            input=Sum("input_tokens"),
            cached_input=Sum("cached_input_tokens"),
            output=Sum("output_tokens"),
            reasoning=Sum("reasoning_tokens"),
            cost=Sum("cost"),
        )
        for row in totals.order_by():
            for kind in ("input", "cached_input", "output", "reasoning"):
                tokens.add_metric([row["provider"], kind], row[kind] or 0)
            cost.add_metric([row["provider"]], float(row["cost"] or 0))
        yield tokens
        yield cost

        window = timezone.now() - timedelta(seconds=settings.METRICS_TURN_WINDOW_SECONDS)
        rows = ChatRun.objects.filter(finished_at__gte=window).values_list("created_at", "finished_at", "outcome")
        durations = sorted(
            ((finished - created).total_seconds(), outcome or "") for created, finished, outcome in rows if finished
        )
        turn = GaugeMetricFamily(
            "opencompany_chat_turn_to_saved_seconds",
            "Chat turns finished in the window: seconds from send to the saved answer, by quantile.",
            labels=["quantile"],
        )
        seconds = [d for d, _ in durations]
        for quantile in (0.5, 0.9, 0.99):
            turn.add_metric(
                [str(quantile)], seconds[min(len(seconds) - 1, int(quantile * len(seconds)))] if seconds else 0
            )
        yield turn
        yield self._first_delta()
        count = GaugeMetricFamily(
            "opencompany_chat_turns_in_window", "Chat turns finished in the window, by outcome.", labels=["outcome"]
        )
        outcomes: dict[str, int] = {}
        for _, outcome in durations:
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        for outcome, n in sorted(outcomes.items()):
            count.add_metric([outcome], n)
        yield count

    @staticmethod
    def _first_delta():
        from chat.events import first_delta_times
        from chat.models import ChatRun

        sent = first_delta_times(time.time() - settings.METRICS_TURN_WINDOW_SECONDS)
        created = dict(ChatRun.objects.filter(pk__in=list(sent)).values_list("pk", "created_at")) if sent else {}
        seconds = sorted(max(0.0, sent[pk] - at.timestamp()) for pk, at in created.items())
        first = GaugeMetricFamily(
            "opencompany_chat_turn_to_first_delta_seconds",
            "Chat turns whose first text went out in the window: seconds from send to that first text, by quantile.",
            labels=["quantile"],
        )
        for quantile in (0.5, 0.9, 0.99):
            first.add_metric(
                [str(quantile)], seconds[min(len(seconds) - 1, int(quantile * len(seconds)))] if seconds else 0
            )
        return first


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
