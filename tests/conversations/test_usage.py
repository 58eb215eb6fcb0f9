"""The usage ledger: append-only, idempotent per key, read-only in admin; pressure kept apart from usage."""

import dataclasses
import threading

import pytest
from django.contrib.admin.sites import site
from django.db import DatabaseError, connection, transaction
from django.test import RequestFactory

from conversations.models import AgentConversation, UsageRecord
from conversations.services import UsageEntry, usage_record_append, usage_record_statements
from conversations.store import conversation_pressure_record, save_conversation
from tests.conversations.factories import user

pytestmark = pytest.mark.django_db


def _append(key="step:1", **overrides):
    fields = dict(idempotency_key=key, kind="llm", provider="openai", model="gpt", outcome="ok", input_tokens=100,
                  cached_input_tokens=40, output_tokens=20, reasoning_tokens=5, cost=0.0123)  # fmt: skip
    fields.update(overrides)
    return usage_record_append(entry=UsageEntry(**fields))


def test_a_retried_persist_never_bills_twice():
    assert _append() is True
    assert _append(input_tokens=999) is False
    record = UsageRecord.objects.get()
    assert (record.input_tokens, record.cached_input_tokens, record.output_tokens, record.reasoning_tokens) == (
        100,
        40,
        20,
        5,
    )
    assert str(record.cost) == "0.012300"


def test_kinds_and_outcomes_are_checked():
    with pytest.raises(ValueError):
        _append(kind="guess")
    with pytest.raises(ValueError):
        _append(outcome="maybe")
    for kind in ("llm", "compaction", "embedding"):
        for outcome in ("ok", "error", "ambiguous"):
            assert _append(key=f"{kind}:{outcome}", kind=kind, outcome=outcome)


def test_one_typed_entry_is_the_bill_checked_where_it_is_made():
    # Refused when built, before any statement is made of it; and frozen: the statement and the row agree.
    with pytest.raises(ValueError):
        UsageEntry(idempotency_key="k", kind="guess", provider="openai", model="gpt", outcome="ok")
    entry = UsageEntry(idempotency_key="step:entry", kind="llm", provider="openai", model="gpt", outcome="ok",
                       input_tokens=-3, output_tokens=7, meta={"price_note": "none"})  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.output_tokens = 1
    ((name, _, params),) = usage_record_statements(entry=entry)
    assert name == "usage_recorded" and params[0] == "step:entry" and params[8:12] == [0, 0, 7, 0]
    assert usage_record_append(entry=entry) is True and usage_record_append(entry=entry) is False
    record = UsageRecord.objects.get(idempotency_key="step:entry")
    assert (record.input_tokens, record.output_tokens, record.meta) == (0, 7, {"price_note": "none"})


def test_the_ledger_cannot_be_changed_or_deleted():
    _append()
    with pytest.raises(TypeError):
        UsageRecord.objects.filter(idempotency_key="step:1").update(input_tokens=0)
    with pytest.raises(TypeError):
        UsageRecord.objects.all().delete()
    with pytest.raises(TypeError):
        UsageRecord.objects.get().delete()
    # and the database refuses it even for raw SQL
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_usagerecord SET input_tokens = 0")
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM conversations_usagerecord")
    assert UsageRecord.objects.get().input_tokens == 100


def test_admin_is_read_only(admin_user):
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    model_admin = site._registry[UsageRecord]
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_insert_once():
    barrier, results, errors = threading.Barrier(4), [], []

    def retry():
        try:
            barrier.wait(5)
            results.append(_append(key="step:race"))
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=retry) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors and sorted(results) == [False, False, False, True]
    assert UsageRecord.objects.filter(idempotency_key="step:race").count() == 1


def test_pressure_is_stored_on_the_conversation_not_in_the_ledger(key):
    assert not conversation_pressure_record(key, input_tokens=1, output_headroom_tokens=1, context_window_tokens=10)
    save_conversation(key, [user("hi")])
    version = AgentConversation.objects.get().version
    assert conversation_pressure_record(key, input_tokens=5000, output_headroom_tokens=1000, context_window_tokens=8000)
    header = AgentConversation.objects.get()
    assert (header.pressure_input_tokens, header.pressure_output_tokens, header.context_window_tokens) == (
        5000,
        1000,
        8000,
    )
    assert header.version == version  # pressure is not a change of the messages
    assert not UsageRecord.objects.exists()
