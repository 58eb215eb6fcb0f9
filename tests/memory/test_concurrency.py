import psycopg
import pytest
from django.db import connection

from memory.models import MemoryItem, MemoryItemHistory
from memory.services import memory_item_remember, memory_item_update, memory_namespace_get_or_create
from tests.memory.helpers import NODE
from tests.race import Competitor, run_after, wait_until, wait_until_waiting_on_a_lock, waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def _namespace(owner, make_workflow):
    return memory_namespace_get_or_create(owner=owner, workflow=make_workflow(owner), node_id=NODE)


def _update(namespace, item_id, text):
    try:
        memory_item_update(
            namespace=namespace, item_id=item_id, expected_version=1, patch={"content": text}, actor=f"agent:{text}"
        )
        return "won"
    except Exception as exc:
        return getattr(exc, "code", repr(exc))


def test_two_writers_with_the_same_expected_version_exactly_one_wins(owner, make_workflow):
    """Given two updates of version 1, when the second reads the item while the first holds it (between the first's
    locked read and its write), then the second waits for the first and gets the conflict: nothing is overwritten."""
    namespace = _namespace(owner, make_workflow)
    item_id = memory_item_remember(namespace=namespace, content="start", actor="t")["item"]["id"]
    competitors = []

    def second_writer_arrives(*args, **kwargs):
        competitor = Competitor(lambda: _update(namespace, item_id, "right"), name="right").start()
        competitors.append(competitor)
        # With the row lock the second writer queues behind us; without it, it would read version 1 and finish.
        wait_until(lambda: competitor.done or waiting_on_a_lock(pid=competitor.pid), what="the second writer")

    with run_after("memory.services.items.memory_item_live_for_update", second_writer_arrives):
        first = _update(namespace, item_id, "left")
    assert (first, competitors[0].result()) == ("won", "version_conflict")
    item = MemoryItem.objects.get(pk=item_id)
    assert item.version == 2 and item.content == "left"
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

        def ours():
            try:
                memory_item_update(
                    namespace=namespace,
                    item_id=item_id,
                    expected_version=1,
                    patch={"content": "ours"},
                    actor="agent:ours",
                )
                return {"result": "won"}
            except Exception as exc:
                return {
                    "result": getattr(exc, "code", repr(exc)),
                    "current": getattr(exc, "extra", {}).get("current_version"),
                }

        competitor = Competitor(ours, name="ours").start()
        wait_until_waiting_on_a_lock(pid=competitor.pid)  # our update waits on the row lock
        other.commit()
        assert competitor.result() == {"result": "version_conflict", "current": 2}
        assert MemoryItem.objects.get(pk=item_id).content == "theirs"
    finally:
        other.close()
