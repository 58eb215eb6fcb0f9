"""Run events on the workflow socket: seq per run without gaps, metadata-only events, owner-only delivery."""

from __future__ import annotations

import pytest

from chat.delta_batcher import DeltaBatcher
from chat.events import chat_updated_event, run_ended_event, run_started_event
from chat.services import chat_feedback_set, chat_message_send
from tests.chat.helpers import chat_workflow
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
    """Events until `done(event)`."""
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
        own.assert_nothing_before_marker(theirs.pk)
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
        socket.assert_nothing_before_marker(workflow.pk)
    finally:
        socket.close()
    assert event["type"] == "chat.updated" and event["reason"] == "feedback"
    assert set(event) == {"type", "workflow_id", "revision", "reason", "hub_epoch"}


def test_a_delta_that_arrives_after_the_run_ended_leaves_no_text_in_redis(settings):
    # Another process's sender may still hold a delta when the run ends; its append must not recreate the text.
    import redis

    from chat import run_stream

    run_id = 9_000_001
    run_stream.reset_run_stream(run_id)
    assert run_stream.run_stream_state(run_id) == (0, "")
    assert run_stream._next_seq(run_id, "Hello ") == 1
    assert run_stream._next_seq(run_id, "world") == 2
    assert run_stream.run_stream_state(run_id) == (2, "Hello world")
    client = redis.Redis.from_url(settings.REDIS_URL)
    run_stream.forget_run_stream(run_id)  # the run ended
    assert run_stream._next_seq(run_id, "late text") == 3  # still counted, so the socket sees no gap
    assert not client.exists(run_stream._text_key(run_id))
    assert run_stream.run_stream_state(run_id) == (3, "")
    # Even a late delta that brings the text streamed before it does not re-seed an ended run's stream.
    assert run_stream._next_seq(run_id, "later", seed="Hello world") == 4
    assert not client.exists(run_stream._text_key(run_id))
    client.delete(run_stream._seq_key(run_id), run_stream._ended_key(run_id))


class _Sender:
    """Stands in for the process's sender loop: builds are run by the test, in order, when it says so."""

    def __init__(self):
        self.queued = []

    def submit(self, build):
        self.queued.append(build)

    def submit_later(self, delay, build):
        assert 0 < delay <= 2.0
        self.queued.append(build)

    def run(self):
        built = []
        while self.queued:
            result = self.queued.pop(0)()
            if result is not None:
                built.append(result[1])
        return built


@pytest.fixture
def fake_sender(monkeypatch):
    from chat import delta_batcher, run_stream

    fake = _Sender()
    monkeypatch.setattr(run_stream, "sender", fake)  # metadata events
    monkeypatch.setattr(delta_batcher, "sender", fake)  # text deltas
    return fake


def test_a_delta_batch_redis_refuses_keeps_its_text_and_goes_out_later(settings, monkeypatch, fake_sender):
    import redis

    from chat import run_stream

    run_id = 9_000_002
    run_stream.reset_run_stream(run_id)
    real = run_stream._next_seq
    failures = {"left": 2}

    def flaky(*args, **kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise redis.ConnectionError("Redis is restarting")
        return real(*args, **kwargs)

    monkeypatch.setattr(run_stream, "_next_seq", flaky)
    batcher = DeltaBatcher(workflow_id=1, run_id=run_id)
    batcher.add("The launch ")
    first = fake_sender.queued.pop(0)
    assert first() is None  # Redis refused: nothing sent, a retry queued
    batcher.add("is on ")  # arrives meanwhile: joins the kept text
    batcher.add("Friday.")
    sent = fake_sender.run()
    assert [e["text"] for e in sent] == ["The launch is on Friday."]
    assert [e["seq"] for e in sent] == [1]  # nothing was given up on, so no gap
    assert run_stream.run_stream_state(run_id) == (1, "The launch is on Friday.")
    redis.Redis.from_url(settings.REDIS_URL).delete(run_stream._seq_key(run_id), run_stream._text_key(run_id))


def test_a_stream_redis_lost_is_reseeded_by_the_process_streaming_it(settings, fake_sender):
    import redis

    from chat import run_stream

    run_id = 9_000_003
    client = redis.Redis.from_url(settings.REDIS_URL)
    run_stream.reset_run_stream(run_id)
    batcher = DeltaBatcher(workflow_id=1, run_id=run_id)
    batcher.add("Hello ")
    batcher.add("there, ")
    assert [e["seq"] for e in fake_sender.run()] == [1]
    client.delete(run_stream._seq_key(run_id), run_stream._text_key(run_id))  # Redis restarted empty
    run_stream.send_run_event_now(workflow_id=1, run_id=run_id, event={"type": "run.step"})  # counts, cannot seed
    batcher.add("owner.")
    sent = fake_sender.run()
    # The re-seeding batch skips a number: a page that refetched before it (empty text) sees the gap and refetches.
    assert [(e["type"], e["seq"]) for e in sent] == [("run.step", 1), ("run.delta", 3)]
    # The snapshot a page refetches has all the text again, in line with the new counter.
    assert run_stream.run_stream_state(run_id) == (3, "Hello there, owner.")
    client.delete(run_stream._seq_key(run_id), run_stream._text_key(run_id))


def test_an_event_given_up_on_shows_as_a_gap_in_the_next_seq(settings, monkeypatch, fake_sender):
    import redis

    from chat import run_stream

    run_id = 9_000_004
    settings.CHAT_EVENT_RETRY_SECONDS = 0
    run_stream.reset_run_stream(run_id)
    real = run_stream._next_seq
    failing = {"on": True}

    def flaky(*args, **kwargs):
        if failing["on"]:
            raise redis.ConnectionError("Redis is away")
        return real(*args, **kwargs)

    monkeypatch.setattr(run_stream, "_next_seq", flaky)
    run_stream.send_run_event_now(workflow_id=1, run_id=run_id, event={"type": "run.step"})
    assert fake_sender.run() == []  # retried until CHAT_EVENT_RETRY_SECONDS, then given up on
    failing["on"] = False
    run_stream.send_run_event_now(workflow_id=1, run_id=run_id, event={"type": "run.step"})
    run_stream.send_run_event_now(workflow_id=1, run_id=run_id, event={"type": "run.step"})
    assert [e["seq"] for e in fake_sender.run()] == [2, 3]  # seq 1 is the one the page never got: it refetches
    redis.Redis.from_url(settings.REDIS_URL).delete(run_stream._seq_key(run_id), run_stream._text_key(run_id))


def test_the_time_to_the_first_delta_is_in_the_metrics(owner, inline, client, make_user, settings):
    import redis

    from chat import run_stream
    from tests.waiting import wait_until

    redis.Redis.from_url(settings.REDIS_URL).delete(run_stream.FIRST_DELTA_KEY)
    workflow, _, _ = chat_workflow(owner)
    _, run, _ = chat_message_send(workflow=workflow, text="how fast is the first word?")
    # Recorded by the sender thread as the first delta goes out.
    first = wait_until(lambda: run_stream.first_delta_times(0).get(run.pk), timeout=10, what="the first delta's time")
    run.refresh_from_db()
    assert run.created_at.timestamp() <= first <= run.finished_at.timestamp() + 1
    client.force_login(make_user("ops", is_staff=True))
    lines = client.get("/metrics").content.decode().splitlines()
    median = next(
        line for line in lines if line.startswith('opencompany_chat_turn_to_first_delta_seconds{quantile="0.5"}')
    )
    assert float(median.rsplit(" ", 1)[1]) == pytest.approx(first - run.created_at.timestamp(), abs=1e-3)
    redis.Redis.from_url(settings.REDIS_URL).delete(run_stream.FIRST_DELTA_KEY)


def test_a_send_hands_over_run_started_and_the_end_run_finished_as_the_constructors_build_them(
    owner, inline, capture_events
):
    workflow, _, _ = chat_workflow(owner)
    message, run, _ = chat_message_send(workflow=workflow, text="hello")
    run.refresh_from_db()
    run_events = [sent for sent in capture_events.sent if sent.run_id == run.pk]
    assert run_events[0].event == run_started_event(
        workflow_id=workflow.pk, kind="message", state="pending", user_message_id=message.pk
    )
    assert run_events[-1].event == run_ended_event(
        workflow_id=workflow.pk,
        state="finished",
        outcome="answered",
        reply_message_id=run.reply_message_id,
        status="complete",
        revision=run.session.revision,
    )
    assert [sent.type for sent in run_events] == ["run.started", "run.finished"]  # deltas: the socket test above

    capture_events.clear()
    chat_feedback_set(workflow=workflow, message_id=run.reply_message_id, rating="good")
    session_revision = type(run.session).objects.get(pk=run.session_id).revision
    assert capture_events.events() == [
        chat_updated_event(workflow_id=workflow.pk, revision=session_revision, reason="feedback")
    ]


def test_run_started_has_gone_out_before_the_firings_first_task_is_queued(owner, broker, monkeypatch):
    """The admitting process sends seq 1 and a worker the later seqs: were the task queued first, a worker's event
    could reach the pages before run.started (seen under load in tests/scaleout/test_scale_out.py as 2, 1, 3...)."""
    import time

    from channels_redis.core import RedisChannelLayer

    from opencompany.celery import app

    order: list[str] = []
    group_send = RedisChannelLayer.group_send

    async def slow_group_send(self, group, message):
        if message.get("event", {}).get("type") == "run.started":
            time.sleep(0.3)  # the web process's sender thread, descheduled on a busy machine
            await group_send(self, group, message)
            order.append("run.started sent")
        else:
            await group_send(self, group, message)

    keep = app.send_task

    def send_task(name, args=None, **options):
        order.append(f"task {name}")
        return keep(name, args, **options)

    monkeypatch.setattr(RedisChannelLayer, "group_send", slow_group_send)
    monkeypatch.setattr(app, "send_task", send_task)
    workflow, _, _ = chat_workflow(owner)
    chat_message_send(workflow=workflow, text="hello")
    assert order and order[0] == "run.started sent", order
    assert any(entry.startswith("task ") for entry in order[1:]), order
