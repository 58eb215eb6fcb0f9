"""The flush after each transactional test (tests/flush.py) leaves the database as a fresh test database: every
table empty, the usage ledger and vector tables too, content types and permissions as `migrate` made them."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from tests.flush import KEPT_TABLES

pytestmark = pytest.mark.django_db(transaction=True)


def counts() -> dict[str, int]:
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    with connection.cursor() as cursor:
        found = {}
        for table in tables:
            cursor.execute(f"select count(*) from {connection.ops.quote_name(table)}")
            found[table] = cursor.fetchone()[0]
    return found


def test_a_flush_empties_every_table_and_keeps_what_migrate_made(owner, inline):
    from chat.services import chat_message_send
    from tests.chat.helpers import chat_workflow

    workflow, _, _ = chat_workflow(owner, memory=True)
    chat_message_send(workflow=workflow, text="remember: the launch is on Friday")
    before = counts()
    # The rows this test means to see go: the ledger refuses DELETE, the vectors sit in an HNSW index.
    assert before["conversations_usagerecord"] > 0 and before["memory_memoryitem"] > 0, before
    assert before["memory_memoryembedding"] > 0, before
    filled = {table for table, n in before.items() if n and table not in KEPT_TABLES}
    assert len(filled) >= 10, filled

    # As Django's TransactionTestCase calls it after a test.
    call_command(
        "flush", verbosity=0, interactive=False, reset_sequences=False, allow_cascade=False, inhibit_post_migrate=False
    )

    after = counts()
    assert {t: n for t, n in after.items() if n and t not in KEPT_TABLES} == {}
    assert {t: after[t] for t in KEPT_TABLES} == {t: before[t] for t in KEPT_TABLES}
    from django.apps import apps
    from django.contrib.contenttypes.models import ContentType

    assert ContentType.objects.count() == len(apps.get_models())  # one per model, as migrate made them
