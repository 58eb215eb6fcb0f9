from datetime import UTC, datetime, timedelta

import pytest

from memory import clock
from memory.models import MemoryItem, MemoryNamespace
from memory.services import memory_items_purge_expired
from memory.tasks import purge_expired

pytestmark = pytest.mark.django_db

T0 = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def frozen(monkeypatch):
    state = {"now": T0}
    monkeypatch.setattr(clock, "now", lambda: state["now"])
    return state


def test_expired_items_are_never_returned_before_and_after_the_purge(call, frozen, namespace, owner_client, workflow):
    keep = call({"operation": "remember", "content": "Passport renewal reminder, durable"})["item"]
    soon = call(
        {
            "operation": "remember",
            "content": "Passport renewal reminder, temporary",
            "expires_at": (T0 + timedelta(hours=1)).isoformat(),
        }
    )["item"]
    everything = {"operation": "recall", "query": "passport renewal"}
    assert {i["id"] for i in call(everything)["items"]} == {keep["id"], soon["id"]}

    # When the clock passes expires_at (no purge has run yet)
    frozen["now"] = T0 + timedelta(hours=1, seconds=1)
    assert MemoryItem.objects.filter(pk=soon["id"]).exists()
    # Then it is invisible to every read and write
    assert [i["id"] for i in call(everything)["items"]] == [keep["id"]]
    assert [i["id"] for i in call({"operation": "list"})["items"]] == [keep["id"]]
    assert call({"operation": "get", "memory_id": soon["id"]})["error"]["code"] == "not_found"
    assert (
        call({"operation": "update", "memory_id": soon["id"], "expected_version": 1, "patch": {"expires_at": None}})[
            "error"
        ]["code"]
        == "not_found"
    )
    assert call({"operation": "forget", "memory_id": soon["id"], "expected_version": 1})["error"]["code"] == "not_found"
    base = f"/api/workflows/{workflow.pk}/memory/{namespace.node_id}/items/"
    assert [i["id"] for i in owner_client.get(base).json()["items"]] == [keep["id"]]
    assert owner_client.get(f"{base}{soon['id']}/").status_code == 404

    # When the purge runs, the row is gone and the count follows; reads stay the same
    assert purge_expired() == 1
    assert not MemoryItem.objects.filter(pk=soon["id"]).exists()
    assert MemoryNamespace.objects.get(pk=namespace.pk).item_count == 1
    assert [i["id"] for i in call(everything)["items"]] == [keep["id"]]
    assert call({"operation": "get", "memory_id": soon["id"]})["error"]["code"] == "not_found"
    assert memory_items_purge_expired() == 0


def test_an_item_is_visible_until_the_exact_expiry(call, frozen):
    item = call(
        {"operation": "remember", "content": "short lived", "expires_at": (T0 + timedelta(minutes=5)).isoformat()}
    )["item"]
    frozen["now"] = T0 + timedelta(minutes=5) - timedelta(microseconds=1)
    assert call({"operation": "get", "memory_id": item["id"]})["item"]["id"] == item["id"]
    frozen["now"] = T0 + timedelta(minutes=5)
    assert call({"operation": "get", "memory_id": item["id"]})["error"]["code"] == "not_found"


def test_the_purge_task_is_scheduled(settings):
    assert settings.CELERY_BEAT_SCHEDULE["memory-purge-expired"]["task"] == "memory.purge_expired"
