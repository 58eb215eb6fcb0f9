import contextlib

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from core.realtime import workflow_group_name
from tests.realtime import SocketClient
from tests.waiting import wait_until
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_owner_socket_receives_a_group_message_through_the_redis_layer(owner):
    workflow = Workflow.objects.create(owner=owner, name="w")
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"
    socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner)
    assert socket.connect()
    try:
        hello = socket.receive()
        assert hello["type"] == "hello" and hello["workflow_id"] == workflow.pk and hello["hub_epoch"]
        async_to_sync(layer.group_send)(
            workflow_group_name(workflow.pk), {"type": "workflow.event", "event": {"type": "ping.test", "n": 1}}
        )
        assert socket.receive() == {"type": "ping.test", "n": 1}
    finally:
        socket.close()


def test_anonymous_and_other_owner_sockets_are_refused(owner, other_owner):
    workflow = Workflow.objects.create(owner=owner, name="w")
    anonymous = SocketClient(f"/ws/workflows/{workflow.pk}/")
    assert not anonymous.connect()
    assert anonymous.close_code == 4401
    intruder = SocketClient(f"/ws/workflows/{workflow.pk}/", user=other_owner)
    assert not intruder.connect()
    assert intruder.close_code == 4404
    # Refused before the consumer starts: nothing of either socket waits on (or holds a connection to) the layer.
    for refused in (anonymous, intruder):
        wait_until(refused.communicator.future.done, timeout=5, what="the refused socket's application to end")


def test_a_foreign_origin_is_refused(owner):
    workflow = Workflow.objects.create(owner=owner, name="w")
    socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner, origin="http://evil.example")
    assert not socket.connect()


def test_an_idle_socket_s_receive_outlasts_the_layer_s_blocking_wait():
    # An open page with nothing to hear sits in the layer's BZPOPMIN; with the client's read timeout at or below
    # that wait (redis-py 8's default is 5 s, the layer's wait 5 s) every idle page was dropped with 1011 after
    # the retries ran out. One blocking wait on an empty channel must end with "nothing", not a timeout.
    import asyncio

    from channels_redis.core import RedisChannelLayer
    from django.conf import settings

    async def wait_on_an_empty_channel():
        layer = RedisChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])
        try:
            return await layer.connection(0).bzpopmin("test-idle-channel-nobody-sends-to", timeout=layer.brpop_timeout)
        finally:
            await layer.flush()

    assert asyncio.run(wait_on_an_empty_channel()) is None


def test_a_socket_whose_application_is_cancelled_leaves_no_periodic_task_behind(owner):
    # daphne cancels an application that does not end within its close timeout; the consumer's session re-check
    # and group re-join loops are tasks of their own and must end with it, not run on for the life of the process.
    import asyncio

    async def periodic_tasks():
        return {t for t in asyncio.all_tasks() if "_periodically" in t.get_coro().__qualname__ and not t.done()}

    workflow = Workflow.objects.create(owner=owner, name="w")
    socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner)
    before = socket._run(periodic_tasks())
    assert socket.connect()
    assert socket.receive()["type"] == "hello"
    assert len(socket._run(periodic_tasks()) - before) == 2

    async def cancel_the_application():
        socket.communicator.future.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await socket.communicator.future
        await asyncio.sleep(0)  # let the cancelled tasks run their cancellation

    socket._run(cancel_the_application())
    socket.connected = False
    assert socket._run(periodic_tasks()) - before == set()


def test_a_redis_that_empties_while_a_socket_rejoins_leaves_the_socket_in_its_groups(owner, settings, monkeypatch):
    """The re-join joins, then reads the epoch: a Redis emptied in between took the membership with it while the
    socket said hello on the new epoch, and the events sent until the next re-join were lost (seen in
    tests/scaleout/test_realtime_heals.py)."""
    import redis
    from channels_redis.core import RedisChannelLayer

    settings.WEBSOCKET_REJOIN_SECONDS = 1
    workflow = Workflow.objects.create(owner=owner, name="w")
    group_add = RedisChannelLayer.group_add
    emptied = []

    async def add_then_redis_empties(self, group, channel):
        await group_add(self, group, channel)
        if not emptied and rejoining:
            emptied.append(group)
            redis.Redis.from_url(settings.REDIS_URL).flushdb()

    monkeypatch.setattr(RedisChannelLayer, "group_add", add_then_redis_empties)
    rejoining = False
    socket = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner)
    assert socket.connect()
    try:
        first = socket.receive()
        rejoining = True
        again = socket.receive(timeout=10)  # the re-join saw the new epoch
        assert emptied and again["type"] == "hello" and again["hub_epoch"] != first["hub_epoch"]
        async_to_sync(get_channel_layer().group_send)(
            workflow_group_name(workflow.pk), {"type": "workflow.event", "event": {"type": "ping.test", "n": 2}}
        )
        assert socket.receive(timeout=0.8) == {"type": "ping.test", "n": 2}  # before the next re-join (1 s)
    finally:
        socket.close()
