"""Run events on the workflow socket: seq per run without gaps, metadata-only events, owner-only delivery."""

from __future__ import annotations

import pytest

from chat.services import chat_feedback_set, chat_message_send
from tests.chat.conftest import chat_workflow
from tests.realtime import SocketClient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """A refused socket leaves the process-wide layer bound to its stopped loop; each test gets a new one."""
    from channels.layers import channel_layers

    yield
    channel_layers.backends.clear()


CONTENT_KEYS = {"text", "content", "messages", "prompt", "arguments", "result", "answer"}


def collect_until(socket, done, *, timeout: float = 10) -> list[dict]:
    """Events until `done(event)` (tests/realtime.py's receive_all cannot be used: its timeout cancels the loop)."""
    events = []
    while True:
        event = socket.receive(timeout=timeout)
        events.append(event)
        if done(event):
            return events


def run_events(events, run_id):
    return [e for e in events if e.get("run_id") == run_id]


def test_run_events_have_a_gapless_seq_and_only_deltas_carry_text(owner, inline):
    workflow, _, _ = chat_workflow(owner, memory=True)
    socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner)
    try:
        assert socket.connect()
        hello = socket.receive()
        assert hello["type"] == "hello" and hello["hub_epoch"]
        _, run, _ = chat_message_send(workflow=workflow, text="remember: the launch is on Friday")
        events = collect_until(socket, lambda e: e["type"] == "run.finished")
    finally:
        socket.close()
    mine = run_events(events, run.pk)
    types = [e["type"] for e in mine]
    assert types[0] == "run.started" and types[-1] == "run.finished"
    assert "run.delta" in types and types.count("run.step") == 2  # the memory call started and finished
    assert [e["seq"] for e in mine] == list(range(1, len(mine) + 1))
    assert all(e["hub_epoch"] == hello["hub_epoch"] for e in mine)
    streamed = "".join(e["text"] for e in mine if e["type"] == "run.delta")
    assert streamed.startswith("Calling memory.")
    for event in mine:
        if event["type"] != "run.delta":
            assert not CONTENT_KEYS & set(event), event
    step = next(e for e in mine if e["type"] == "run.step")
    assert step["name"] == "memory" and "arguments" not in step
    # context.updated rides the same socket, metadata only.
    context = [e for e in events if e["type"] == "context.updated"]
    assert context and not CONTENT_KEYS & set(context[0])


def test_another_owners_socket_cannot_join(owner, other_owner, inline):
    workflow, _, _ = chat_workflow(owner)
    intruder = SocketClient(f"/ws/workflows/{workflow.pk}/", user=other_owner)
    try:
        assert not intruder.connect()
        assert intruder.close_code == 4404
    finally:
        intruder.close()


def test_another_owner_hears_nothing_of_this_chat(owner, other_owner, inline):
    workflow, _, _ = chat_workflow(owner)
    theirs, _, _ = chat_workflow(other_owner)
    own = SocketClient(f"/ws/workflows/{theirs.pk}/", user=other_owner)
    try:
        assert own.connect()
        assert own.receive()["type"] == "hello"
        _, run, _ = chat_message_send(workflow=workflow, text="private")
        run.refresh_from_db()
        chat_feedback_set(workflow=workflow, message_id=run.reply_message_id, rating="good")
        assert own.nothing_received(timeout=1.0)
    finally:
        own.close()


def test_a_chat_change_is_announced_without_content(owner, inline):
    workflow, _, _ = chat_workflow(owner)
    _, run, _ = chat_message_send(workflow=workflow, text="hello")
    run.refresh_from_db()
    socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner)
    try:
        assert socket.connect()
        socket.receive()
        chat_feedback_set(workflow=workflow, message_id=run.reply_message_id, rating="bad")
        event = socket.receive()
        assert socket.nothing_received(timeout=0.3)
    finally:
        socket.close()
    assert event["type"] == "chat.updated" and event["reason"] == "feedback"
    assert set(event) == {"type", "workflow_id", "revision", "reason", "hub_epoch"}


def test_a_delta_that_arrives_after_the_run_ended_leaves_no_text_in_redis(settings):
    # Another process's sender may still hold a delta when the run ends; its append must not recreate the text.
    import redis

    from chat import events

    run_id = 9_000_001
    events.reset_run_stream(run_id)
    assert events.run_stream_state(run_id) == (0, "")
    assert events._next_seq(run_id, "Hello ") == 1
    assert events._next_seq(run_id, "world") == 2
    assert events.run_stream_state(run_id) == (2, "Hello world")
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(events._text_key(run_id))  # what forget_run_stream does, from the sender
    assert events._next_seq(run_id, "late text") == 3  # still counted, so the socket sees no gap
    assert not client.exists(events._text_key(run_id))
    assert events.run_stream_state(run_id) == (3, "")
    client.delete(events._seq_key(run_id))
