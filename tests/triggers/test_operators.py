"""What operators see: the sweep in beat's schedule, trigger counts and lag in /metrics, the schedules in admin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client

from opencompany.celery import app
from tests.triggers.helpers import scheduled_workflow
from triggers.models import Schedule
from triggers.services import schedules_sweep

pytestmark = pytest.mark.django_db(transaction=True)


def test_beat_sends_the_sweep_and_the_workers_know_both_tasks():
    entry = settings.CELERY_BEAT_SCHEDULE["triggers-sweep"]
    assert entry["task"] == "triggers.sweep" and entry["options"]["queue"] == settings.CELERY_QUEUE_HOUSEKEEPING
    assert {"triggers.sweep", "triggers.fire_deliver"} <= set(app.tasks)


def test_metrics_show_schedules_fires_and_the_sweeps_lag(owner, make_user, monkeypatch):
    monkeypatch.setattr("triggers.services.enqueue_task", lambda *a, **kw: None)
    workflow, _, _ = scheduled_workflow(owner, every_minutes=1)
    row = Schedule.objects.get(workflow=workflow)
    schedules_sweep(now=row.next_due_at)
    Schedule.objects.filter(pk=row.pk).update(next_due_at=row.next_due_at - timedelta(minutes=10))  # overdue
    client = Client()
    client.force_login(make_user("ops", is_staff=True))
    lines = client.get("/metrics").content.decode().splitlines()
    assert 'opencompany_trigger_schedules{state="running"} 1.0' in lines
    assert 'opencompany_trigger_fires{kind="schedule",state="queued"} 1.0' in lines
    lag = next(line for line in lines if line.startswith("opencompany_trigger_sweep_lag_seconds "))
    assert float(lag.split()[1]) >= 9 * 60 - 5
    assert any(line.startswith('opencompany_trigger_webhook_refused{status="401"}') for line in lines)


def test_admin_lists_the_schedules_with_their_next_due_time(owner, make_user):
    workflow, _, _ = scheduled_workflow(owner, every_minutes=5)
    client = Client()
    client.force_login(make_user("admin", is_staff=True, is_superuser=True))
    page = client.get("/admin/triggers/schedule/")
    assert page.status_code == 200 and "Morning" in page.content.decode()
    assert client.get("/admin/triggers/triggerfire/").status_code == 200
