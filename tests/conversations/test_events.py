"""`context.updated` on the real socket (ASGI app, session auth, Redis channel layer): after commit, metadata only,
only to the owner's sockets, never for a rolled-back or idempotent save."""

import json

import pytest
from django.db import transaction

from conversations.events import context_updated_event
from conversations.store import clear_conversation, conversation_key, save_conversation
from tests.conversations.factories import assistant, system, user
from tests.realtime import SocketClient
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "the owner's private words 7c1f"


@pytest.fixture
def sockets():
    opened = []

    def open_socket(workflow, user_):
        socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=user_)
        assert socket.connect()
        assert socket.receive()["type"] == "hello"
        opened.append(socket)
        return socket

    yield open_socket
    for socket in opened:
        socket.close()


def test_a_committed_save_sends_metadata_only_to_the_owner(owner, sockets):
    workflow = Workflow.objects.create(owner=owner, name="mine")
    mine = sockets(workflow, owner)
    key = conversation_key(workflow.pk, 1, f"{workflow.pk}:agent:1")

    save_conversation(key, [system(SECRET), user(SECRET), assistant(SECRET)])

    event = mine.receive(timeout=3)
    assert event == {
        "type": "context.updated",
        "workflow_id": workflow.pk,
        "generation": 1,
        "agent_node_id": key.agent_node_id,
        "message_count": 3,
    }
    assert SECRET not in json.dumps(event)


def test_another_owners_socket_never_receives_it(owner, other_owner, sockets):
    # (One socket per test: the channel layer serves one event loop at a time, and each client has its own.)
    workflow = Workflow.objects.create(owner=owner, name="mine")
    theirs = Workflow.objects.create(owner=other_owner, name="theirs")
    intruder = sockets(theirs, other_owner)

    # the intruder's socket does work: its own workflow's change reaches it
    save_conversation(conversation_key(theirs.pk, 1, "a"), [user("theirs")])
    assert intruder.receive(timeout=3)["workflow_id"] == theirs.pk

    save_conversation(conversation_key(workflow.pk, 1, "a"), [user(SECRET)])
    clear_conversation(workflow)
    intruder.assert_nothing_before_marker(theirs.pk)


def test_a_rolled_back_save_sends_nothing(owner, capture_events):
    workflow = Workflow.objects.create(owner=owner, name="mine")
    key = conversation_key(workflow.pk, 1, "a")

    with pytest.raises(RuntimeError), transaction.atomic():
        save_conversation(key, [user("never stored")])
        raise RuntimeError("the surrounding work failed")

    assert capture_events.sent == []
    save_conversation(key, [user("stored")])  # the capture sees a committed one
    assert capture_events.events() == [
        context_updated_event(workflow_id=workflow.pk, generation=1, agent_node_id="a", message_count=1)
    ]


def test_an_unchanged_save_announces_nothing_and_clear_announces_zero(owner, sockets):
    workflow = Workflow.objects.create(owner=owner, name="mine")
    socket = sockets(workflow, owner)
    key = conversation_key(workflow.pk, 2, "a")
    save_conversation(key, [user("q"), assistant("a")])
    assert socket.receive(timeout=3)["message_count"] == 2

    save_conversation(key, [user("q"), assistant("a")])  # an idempotent replay of the same turn
    socket.assert_nothing_before_marker(workflow.pk)

    assert clear_conversation(workflow) == 1
    event = socket.receive(timeout=3)
    assert (event["type"], event["generation"], event["agent_node_id"], event["message_count"]) == (
        "context.updated",
        2,
        "a",
        0,
    )
