"""Issue 20, "operators can see it": /metrics for staff or the bearer token, with request latency, queue depth per
Celery queue, firings by end reason, tokens and cost by provider and chat turn latency."""

from __future__ import annotations

from decimal import Decimal

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from conversations.models import UsageRecord

pytestmark = pytest.mark.django_db


def samples(response) -> dict:
    assert response.status_code == 200, response.status_code
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_only_staff_or_the_bearer_token_may_read_metrics(client, make_user, settings):
    owner = make_user("plain")
    assert client.get("/metrics").status_code == 404
    client.force_login(owner)
    assert client.get("/metrics").status_code == 404
    settings.METRICS_TOKEN = "scrape-secret"
    client.logout()
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
    client.force_login(make_user("ops", is_staff=True))
    assert client.get("/metrics").status_code == 200


def test_the_metrics_say_what_happened(client, make_user, owner_client, settings):
    UsageRecord.objects.create(
        idempotency_key="m-1",
        kind="llm",
        provider="openai",
        model="m",
        input_tokens=120,
        output_tokens=30,
        cost=Decimal("0.25"),
        outcome="ok",
    )
    UsageRecord.objects.create(
        idempotency_key="m-2",
        kind="llm",
        provider="openai",
        model="m",
        input_tokens=5,
        output_tokens=1,
        cost=Decimal("0.5"),
        outcome="ok",
    )
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("agent")
    broker.rpush("agent", "a", "b", "c")
    try:
        owner_client.get("/api/workflows/")
        client.force_login(make_user("ops", is_staff=True))
        found = samples(client.get("/metrics"))
    finally:
        broker.delete("agent")
    assert found[("opencompany_celery_queue_length", (("queue", "agent"),))] == 3
    assert found[("opencompany_provider_tokens_total", (("kind", "input"), ("provider", "openai")))] == 125
    assert found[("opencompany_provider_cost_total", (("provider", "openai"),))] == 0.75
    latency = [k for k in found if k[0] == "opencompany_http_request_duration_seconds_count"]
    assert any(dict(labels).get("route") == "api/workflows/" for _, labels in latency), latency
    assert any(name == "opencompany_chat_turn_to_saved_seconds" for name, _ in found)


# Every series /metrics served before the apps handed their collectors over at start-up (issue 31); the split must
# not lose or rename one. The process-wide defaults of prometheus_client (python_*, process_*) are left out.
SERIES_BEFORE_THE_SPLIT = {
    "opencompany_http_request_duration_seconds",
    "opencompany_http_request_duration_seconds_created",
    "opencompany_celery_queue_length",
    "opencompany_firings",
    "opencompany_provider_tokens",
    "opencompany_provider_cost",
    "opencompany_chat_turn_to_saved_seconds",
    "opencompany_chat_turn_to_first_delta_seconds",
    "opencompany_chat_turns_in_window",
}
# Added after the split (docs/triggers.md#operators).
TRIGGER_SERIES = {
    "opencompany_trigger_schedules",
    "opencompany_trigger_fires",
    "opencompany_trigger_sweep_lag_seconds",
    "opencompany_trigger_webhook_refused",
}


def test_the_metrics_serve_the_same_series_as_before_the_split(client, make_user):
    client.force_login(make_user("ops", is_staff=True))
    client.get("/metrics")  # one request observed, so the latency histogram has a sample to show
    response = client.get("/metrics")
    assert response.status_code == 200
    names = {family.name for family in text_string_to_metric_families(response.content.decode())}
    assert {name for name in names if name.startswith("opencompany_")} == SERIES_BEFORE_THE_SPLIT | TRIGGER_SERIES
