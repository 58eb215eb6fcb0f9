"""The chat's series for `/metrics` (registered with core.metrics in ChatConfig.ready()): turn latency over the last
METRICS_TURN_WINDOW_SECONDS, send to saved (finished chat runs) and send to the first streamed text (the time each
run's first delta went out, kept an hour in Redis by chat.run_stream)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from chat.models import ChatRun
from chat.run_stream import first_delta_times
from core.metrics import quantile_gauge


def chat_turn_metrics() -> Iterable[Metric]:
    window = timezone.now() - timedelta(seconds=settings.METRICS_TURN_WINDOW_SECONDS)
    rows = ChatRun.objects.filter(finished_at__gte=window).values_list("created_at", "finished_at", "outcome")
    durations = sorted(
        ((finished - created).total_seconds(), outcome or "") for created, finished, outcome in rows if finished
    )
    yield quantile_gauge(
        "opencompany_chat_turn_to_saved_seconds",
        "Chat turns finished in the window: seconds from send to the saved answer, by quantile.",
        [seconds for seconds, _ in durations],
    )
    yield _first_delta()
    count = GaugeMetricFamily(
        "opencompany_chat_turns_in_window", "Chat turns finished in the window, by outcome.", labels=["outcome"]
    )
    outcomes: dict[str, int] = {}
    for _, outcome in durations:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    for outcome, n in sorted(outcomes.items()):
        count.add_metric([outcome], n)
    yield count


def _first_delta() -> Metric:
    sent = first_delta_times(time.time() - settings.METRICS_TURN_WINDOW_SECONDS)
    created = dict(ChatRun.objects.filter(pk__in=list(sent)).values_list("pk", "created_at")) if sent else {}
    return quantile_gauge(
        "opencompany_chat_turn_to_first_delta_seconds",
        "Chat turns whose first text went out in the window: seconds from send to that first text, by quantile.",
        sorted(max(0.0, sent[pk] - at.timestamp()) for pk, at in created.items()),
    )
