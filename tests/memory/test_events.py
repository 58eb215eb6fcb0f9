import pytest
from channels.layers import get_channel_layer

from memory.events import memory_updated_event
from memory.services import memory_namespace_clear
from tests.memory.helpers import NODE
from tests.realtime import SocketClient

pytestmark = pytest.mark.django_db(transaction=True)

EVENT_KEYS = {"type", "workflow_id", "memory_node_id", "item_id", "operation", "version"}
SECRET = "the vault code is 4711"


def test_memory_updated_on_the_owners_socket_carries_no_content_and_is_not_repeated_on_replay(call, owner, workflow):
    assert type(get_channel_layer()).__name__ == "RedisChannelLayer"
    socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner)
    assert socket.connect()
    try:
        assert socket.receive()["type"] == "hello"
        arguments = {"operation": "remember", "content": SECRET, "title": SECRET, "tags": ["vault"]}
        item = call(arguments, key="explicit:1")["item"]
        event = socket.receive()
        assert event == {
            "type": "memory.updated",
            "workflow_id": workflow.pk,
            "memory_node_id": NODE,
            "item_id": item["id"],
            "operation": "remember",
            "version": 1,
        }
        assert set(event) == EVENT_KEYS and "4711" not in repr(event) and "vault" not in repr(event)

        # An idempotent replay sends nothing
        assert call(arguments, key="explicit:1") == {"item": item}
        socket.assert_nothing_before_marker(workflow.pk)

        call(
            {"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"content": SECRET + "!"}},
            key="explicit:2",
        )
        update = socket.receive()
        assert (update["operation"], update["version"]) == ("update", 2) and "4711" not in repr(update)
        # A refused write sends nothing
        call({"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"title": "x"}})
        socket.assert_nothing_before_marker(workflow.pk)

        assert "forgotten" in call({"operation": "forget", "memory_id": item["id"], "expected_version": 2})
        forget = socket.receive()
        assert (forget["operation"], forget["item_id"], forget["version"]) == ("forget", item["id"], 2)

        call({"operation": "remember", "content": "another"})
        socket.receive()
        assert memory_namespace_clear(workflow=workflow, node_id=NODE, actor="system:reset") == 1
        cleared = socket.receive()
        assert set(cleared) == EVENT_KEYS and cleared["operation"] == "clear" and cleared["item_id"] is None
    finally:
        socket.close()


def test_another_owners_socket_hears_nothing(call, owner, other_owner, make_workflow, workflow):
    theirs = make_workflow(other_owner)
    socket = SocketClient(f"/ws/workflows/{theirs.pk}/", user=other_owner)
    assert socket.connect()
    try:
        socket.receive()
        call({"operation": "remember", "content": SECRET})
        socket.assert_nothing_before_marker(theirs.pk)
    finally:
        socket.close()


def test_each_write_sends_one_memory_updated_and_a_replay_or_refusal_none(call, workflow, capture_events):
    arguments = {"operation": "remember", "content": SECRET}
    item = call(arguments, key="k:1")["item"]
    expected = memory_updated_event(
        workflow_id=workflow.pk, memory_node_id=NODE, item_id=item["id"], operation="remember", version=1
    )
    assert capture_events.events() == [expected]
    capture_events.clear()
    call(arguments, key="k:1")  # the same receipt: a replay
    call({"operation": "update", "memory_id": item["id"], "expected_version": 7, "patch": {"title": "x"}})
    assert capture_events.sent == []
