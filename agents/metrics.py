"""The runtime's series for `/metrics` (registered with core.metrics in AgentsConfig.ready())."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric

from agents.models import Firing


def firing_metrics() -> Iterable[Metric]:
    firings = GaugeMetricFamily(
        "opencompany_firings",
        "Firings kept (AGENT_FIRING_RETENTION_DAYS) by state and end reason; use delta() for outcomes over time.",
        labels=["state", "end_reason"],
    )
    for row in Firing.objects.values("state", "end_reason").annotate(n=Count("id")).order_by():
        firings.add_metric([row["state"], row["end_reason"] or ""], row["n"])
    yield firings
