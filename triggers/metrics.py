"""The triggers' series for `/metrics` (registered in TriggersConfig.ready()): schedules by state, fires by state,
and how late the most overdue running schedule is (the sweep's lag)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from .models import Schedule, TriggerFire
from .webhooks import refusal_counts


def trigger_metrics() -> Iterable[Metric]:
    schedules = GaugeMetricFamily("opencompany_trigger_schedules", "Schedule triggers, by state.", labels=["state"])
    running = Schedule.objects.filter(next_due_at__isnull=False)
    schedules.add_metric(["running"], running.count())
    schedules.add_metric(["paused"], Schedule.objects.filter(next_due_at__isnull=True).count())
    yield schedules
    fires = GaugeMetricFamily(
        "opencompany_trigger_fires", "Trigger fires recorded, by kind and state.", labels=["kind", "state"]
    )
    for row in TriggerFire.objects.values("kind", "state").annotate(n=Count("id")).order_by("kind", "state"):
        fires.add_metric([row["kind"], row["state"]], row["n"])
    yield fires
    oldest = running.aggregate(oldest=Min("next_due_at"))["oldest"]
    lag = max(0.0, (timezone.now() - oldest).total_seconds()) if oldest else 0.0
    yield GaugeMetricFamily(
        "opencompany_trigger_sweep_lag_seconds", "How long the most overdue running schedule has been due.", value=lag
    )
    refused = GaugeMetricFamily(
        "opencompany_trigger_webhook_refused",
        "Webhook deliveries refused in the current window (TRIGGERS_WEBHOOK_REFUSED_WINDOW_SECONDS), by status.",
        labels=["status"],
    )
    for status, count in refusal_counts().items():
        refused.add_metric([str(status)], count)
    yield refused
