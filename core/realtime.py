"""The one place that sends realtime events.

Events go to the group of one workflow; only sockets of that workflow's owner may join it
(see consumers.py). `publish_workflow_event` sends on commit so a rolled-back write never
announces itself. Sending happens on one event-loop thread per process (`EventSender`):
`async_to_sync(group_send)` from a plain thread would build a new loop and a new Redis
connection per call (5-10 ms), and a worker must not spend that inside a turn. A broadcast
failure is logged, never raised: the durable write already happened.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable

from django.db import transaction

logger = logging.getLogger(__name__)


def workflow_group_name(workflow_id: int) -> str:
    return f"workflow.{int(workflow_id)}"


def user_group_name(user_id: int) -> str:
    """Every socket of one user (told to re-check its session when the user changes, e.g. a new password)."""
    return f"socket-user.{int(user_id)}"


def session_group_name(session_key: str) -> str:
    """Every socket opened with one login session (closed when it logs out). A digest: the key is a credential."""
    import hashlib

    return "socket-session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


class SocketControl:
    """A message for sockets themselves (close, re-check access), not an event a page shows."""

    def __init__(self, group: str, message_type: str) -> None:
        self.group = group
        self.message = {"type": message_type}


class EventSender:
    """Sends events in the order they were handed over, from one loop thread per process.

    Items are callables run at the head of the queue returning `(workflow_id, event)` or None, so a
    sequence number can be taken in send order and a batch can take what arrived while the previous
    event was on its way.
    """

    def __init__(self) -> None:
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid():  # a forked worker starts its own
                ready = threading.Event()
                self._loop = asyncio.new_event_loop()

                def run(loop=self._loop):
                    asyncio.set_event_loop(loop)
                    self._queue = asyncio.Queue()
                    loop.create_task(self._consume(self._queue))
                    ready.set()
                    loop.run_forever()

                threading.Thread(target=run, daemon=True, name="realtime-events").start()
                ready.wait(5)
                self._pid = os.getpid()
            return self._loop

    async def _consume(self, queue: asyncio.Queue) -> None:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        while True:
            build, delivered = await queue.get()
            try:
                built = build()
                if isinstance(built, SocketControl):
                    await layer.group_send(built.group, built.message)
                elif built is not None:
                    workflow_id, event = built
                    await layer.group_send(workflow_group_name(workflow_id), {"type": "workflow.event", "event": event})
            except Exception:  # a broadcast never fails the caller; clients refetch on a gap or a new epoch
                logger.warning("event not sent", exc_info=True)
            finally:
                if delivered is not None:
                    delivered.set()

    def submit(self, build: Callable[[], tuple[int, dict] | None]) -> None:
        loop = self._ensure()
        loop.call_soon_threadsafe(lambda: self._queue.put_nowait((build, None)))

    def submit_and_wait(self, build: Callable[[], tuple[int, dict] | None], *, timeout: float) -> bool:
        """Queue `build` and wait (at most `timeout` s) until it has been sent, failed, or was put off for a retry.

        For an event another process must not overtake: a run's first event is sent before its first task is
        queued, so a worker's events (which take later seqs) cannot reach a page before it."""
        delivered = threading.Event()
        loop = self._ensure()
        loop.call_soon_threadsafe(lambda: self._queue.put_nowait((build, delivered)))
        return delivered.wait(timeout)

    def submit_later(self, delay: float, build: Callable[[], tuple[int, dict] | None]) -> None:
        """Queue `build` after `delay` seconds (a retry with backoff), without holding up the events behind it."""
        loop = self._ensure()
        loop.call_soon_threadsafe(lambda: loop.call_later(delay, lambda: self._queue.put_nowait((build, None))))


sender = EventSender()


def send_workflow_event_now(*, workflow_id: int, event: dict) -> None:
    """Send without waiting for a transaction (streamed deltas); returns at once."""
    sender.submit(lambda: (workflow_id, event))


def publish_workflow_event(*, workflow_id: int, event: dict) -> None:
    """Queue `event` for the workflow owner's sockets once the current transaction commits."""
    transaction.on_commit(lambda: send_workflow_event_now(workflow_id=workflow_id, event=event))


def send_socket_control(*, group: str, message_type: str) -> None:
    """Tell the sockets of a group to close or re-check their access, once the current transaction commits.

    Sent from the committing thread itself, not handed to the sender's loop thread: a short-lived process (a
    management command deactivating a user) exits right after its commit, and a daemon thread's queue dies with
    it, leaving the sockets open until their next periodic re-check. These are rare (logout, a user saved, a
    workflow deleted), so the cost of a send of their own is paid where it is safe to pay it.
    """
    transaction.on_commit(lambda: _send_socket_control_now(SocketControl(group, message_type)))


def _send_socket_control_now(control: SocketControl) -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # on an event loop's own thread a blocking send is not allowed: queue it (this process lives on)
        sender.submit(lambda: control)
        return
    try:
        async_to_sync(get_channel_layer().group_send)(control.group, control.message)
    except Exception:  # like every broadcast: never fails the commit; the periodic re-check is the net
        logger.warning(
            "socket control not sent group=%s type=%s", control.group, control.message["type"], exc_info=True
        )
