"""The usage ledger's series for `/metrics` (registered with core.metrics in ConversationsConfig.ready()).

The ledger is never pruned, so its sums are true counters."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Sum
from prometheus_client.core import CounterMetricFamily, Metric

from conversations.models import UsageRecord

TOKEN_KINDS = ("input", "cached_input", "output", "reasoning")


def usage_metrics() -> Iterable[Metric]:
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
        for kind in TOKEN_KINDS:
            tokens.add_metric([row["provider"], kind], row[kind] or 0)
        cost.add_metric([row["provider"]], float(row["cost"] or 0))
    yield tokens
    yield cost
