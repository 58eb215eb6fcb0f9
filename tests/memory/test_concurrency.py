import threading

import psycopg
import pytest
from django.db import connection

from memory.models import MemoryItem, MemoryItemHistory
from memory.services import memory_item_remember, memory_item_update, memory_namespace_get_or_create
from tests.memory.conftest import NODE

pytestmark = pytest.mark.django_db(transaction=True)


def _namespace(owner, make_workflow):
    return memory_namespace_get_or_create(owner=owner, workflow=make_workflow(owner), node_id=NODE)


def test_two_connections_with_the_same_expected_version_exactly_one_wins(owner, make_workflow):
    namespace = _namespace(owner, make_workflow)
    for round_number in range(5):
        item_id = memory_item_remember(namespace=namespace, content=f"round {round_number}", actor="t")["item"]["id"]
        barrier = threading.Barrier(2)
        outcomes = []

        def writer(text, item_id=item_id, barrier=barrier, outcomes=outcomes):
            try:
                barrier.wait()
                memory_item_update(
                    namespace=namespace,
                    item_id=item_id,
                    expected_version=1,
                    patch={"content": text},
                    actor=f"agent:{text}",
                )
                outcomes.append(("won", text))
            except Exception as exc:
                outcomes.append((getattr(exc, "code", repr(exc)), text))
            finally:
                connection.close()  # each thread had its own connection

        threads = [threading.Thread(target=writer, args=(text,)) for text in ("left", "right")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        codes = sorted(code for code, _ in outcomes)
        assert codes == ["version_conflict", "won"], outcomes
        winner = next(text for code, text in outcomes if code == "won")
        item = MemoryItem.objects.get(pk=item_id)
        assert item.version == 2 and item.content == winner
        assert MemoryItemHistory.objects.filter(item_id=item_id, operation="update").count() == 1


def test_a_writer_blocked_behind_a_committed_change_gets_the_conflict(owner, make_workflow):
    # Force the interleaving: a second connection holds the row lock and bumps the version while our update waits.
    namespace = _namespace(owner, make_workflow)
    item_id = memory_item_remember(namespace=namespace, content="start", actor="t")["item"]["id"]
    settings_dict = connection.settings_dict
    other = psycopg.connect(
        host=settings_dict["HOST"],
        port=settings_dict["PORT"],
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        password=settings_dict["PASSWORD"] or None,
    )
    try:
        other.execute("SELECT 1 FROM memory_memoryitem WHERE id = %s FOR UPDATE", [item_id])
        other.execute("UPDATE memory_memoryitem SET version = 2, content = 'theirs' WHERE id = %s", [item_id])
        outcome = {}

        def ours():
            try:
                memory_item_update(
                    namespace=namespace,
                    item_id=item_id,
                    expected_version=1,
                    patch={"content": "ours"},
                    actor="agent:ours",
                )
                outcome["result"] = "won"
            except Exception as exc:
                outcome["result"] = getattr(exc, "code", repr(exc))
                outcome["current"] = getattr(exc, "extra", {}).get("current_version")
            finally:
                connection.close()

        thread = threading.Thread(target=ours)
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive(), "our update should be waiting on the row lock"
        other.commit()
        thread.join(timeout=10)
        assert outcome == {"result": "version_conflict", "current": 2}
        assert MemoryItem.objects.get(pk=item_id).content == "theirs"
    finally:
        other.close()
