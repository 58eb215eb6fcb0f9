"""The one WebSocket per open workflow page: authenticate, check ownership, join, relay — and follow the session.

A socket lives only as long as what let it in: its login session (closed at logout, 4401), its user's password
(a password change ends the other sessions, 4401) and the owner's access to the workflow (deleted: 4404). The
logout, user-save and workflow-delete paths tell the sockets at once (core/socket_access.py); a periodic
re-check is the net under them. Client frames are small control messages: their size and nesting are checked
before they are parsed.

Group membership lives in Redis: a Redis restarted empty (or flushed) forgot it, and the socket would hear nothing
until its page reloaded. So a socket re-joins its groups every WEBSOCKET_REJOIN_SECONDS and compares the hub epoch;
when the epoch changed, or a re-join failed and then worked again (events may have gone by), it sends a new
`hello` and the page refetches its snapshot.
"""

import asyncio
import contextlib
import json
import logging
import time
from collections import deque

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from core.hub import hub_epoch
from core.origins import refuse_handshake
from core.realtime import session_group_name, user_group_name, workflow_group_name
from core.socket_access import socket_access_problem

logger = logging.getLogger(__name__)

# The server may close only with 1000 or 3000-4999 (daphne's WebSocket library refuses 1007-1009 from an application
# and the consumer would crash, its groups left in Redis): the frame limits use 4000 + the protocol's own code
# (docs/security.md, "WebSockets follow the session").
CLOSE_SESSION_ENDED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_BIG = 4009  # a frame over WEBSOCKET_MAX_FRAME_BYTES (the protocol's 1009)
CLOSE_POLICY = 4008  # nested past WEBSOCKET_MAX_FRAME_DEPTH (1008)
CLOSE_BAD_DATA = 4007  # not JSON, or a binary frame (1007)
CLOSE_RATE_LIMITED = 4429  # too many messages in SOCKET_MESSAGE_WINDOW_SECONDS


def json_nesting_exceeds(text: str, limit: int) -> bool:
    """Bracket depth of a JSON text, measured without parsing it (brackets inside strings do not count)."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


class WorkflowConsumer(AsyncJsonWebsocketConsumer):
    group_names: tuple[str, ...] = ()
    _recheck_task: asyncio.Task | None = None
    _rejoin_task: asyncio.Task | None = None
    _epoch: str = ""

    async def __call__(self, scope, receive, send):
        refusal = await self._access_refusal(scope)
        if refusal is not None:
            # Refused before Channels opens this consumer's channel-layer listener (core/origins.py).
            return await refuse_handshake(receive, send, code=refusal)
        try:
            return await super().__call__(scope, receive, send)
        finally:
            # However the connection ends (a disconnect, or the server cancelling an application that did not end
            # within its close timeout), the periodic tasks end with it: left running, each would keep querying
            # and re-joining groups for a socket that is gone, for the life of the process.
            self._stop_periodic_tasks()

    def _stop_periodic_tasks(self) -> None:
        for task in (self._recheck_task, self._rejoin_task):
            if task is not None:
                task.cancel()

    async def _access_refusal(self, scope) -> int | None:
        """The close code a socket is refused with (no session, or a workflow the owner cannot see), else None, with
        whom the socket is for kept on the consumer."""
        user = scope.get("user")
        workflow_id = scope["url_route"]["kwargs"]["workflow_id"]
        session_key = getattr(scope.get("session"), "session_key", None)
        if user is None or not user.is_authenticated or not session_key:
            return CLOSE_SESSION_ENDED
        problem = await database_sync_to_async(socket_access_problem)(
            session_key=session_key, user_id=user.pk, workflow_id=workflow_id
        )
        if problem is not None:
            return CLOSE_NOT_FOUND if problem == "not_found" else CLOSE_SESSION_ENDED
        self.user_id, self.session_key, self.workflow_id = user.pk, session_key, workflow_id
        return None

    async def connect(self):
        workflow_id = self.workflow_id  # access was checked before the consumer started (`__call__`)
        groups = (
            workflow_group_name(workflow_id),
            user_group_name(self.user_id),
            session_group_name(self.session_key),
        )
        try:
            for group in groups:
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception:
            # Redis is unreachable: refuse cleanly (1011) so the page retries, instead of a handshake 500.
            logger.warning("socket refused: channel layer unavailable", extra={"workflow_id": workflow_id})
            await self.close(code=1011)
            return
        self.group_names = groups
        await self.accept()
        self._recheck_task = asyncio.create_task(self._recheck_periodically())
        self._rejoin_task = asyncio.create_task(self._rejoin_periodically())
        await self._hello()

    async def _hello(self) -> None:
        self._epoch = await database_sync_to_async(hub_epoch)()
        await self.send_json({"type": "hello", "workflow_id": self.workflow_id, "hub_epoch": self._epoch})

    async def _rejoin_periodically(self) -> None:
        interval = settings.WEBSOCKET_REJOIN_SECONDS
        failing = False
        while True:
            await asyncio.sleep(interval)
            try:
                epoch = await self._join_groups()
            except Exception:
                if not failing:
                    logger.warning("socket re-join failed; retrying", extra={"groups": list(self.group_names)})
                failing = True
                continue
            if not self.group_names:  # closing
                return
            if failing or (epoch != "unavailable" and epoch != self._epoch):
                # Redis was away or came back empty: whatever was sent meanwhile is gone, the page refetches.
                failing = False
                await self._hello()

    async def _join_groups(self) -> str:
        """Join every group again and return the hub epoch the membership counts in. The epoch is read before and
        after: a Redis that came back empty while the groups were being joined took the new membership with it, so
        the groups are joined again on the new epoch instead of leaving the socket deaf until the next re-join."""
        epoch = await database_sync_to_async(hub_epoch)()
        for _ in range(3):
            for group in self.group_names:
                await self.channel_layer.group_add(group, self.channel_name)
            after = await database_sync_to_async(hub_epoch)()
            if after == epoch:
                break
            epoch = after
        return epoch

    async def disconnect(self, code):
        self._stop_periodic_tasks()
        for group in self.group_names:
            with contextlib.suppress(Exception):
                await self.channel_layer.group_discard(group, self.channel_name)
        self.group_names = ()

    def _over_message_limit(self) -> bool:
        # A page sends a ping now and then; a socket flooding messages is closed (the page reconnects later).
        now = time.monotonic()
        sent = self.__dict__.setdefault("_message_times", deque())
        while sent and now - sent[0] > settings.SOCKET_MESSAGE_WINDOW_SECONDS:
            sent.popleft()
        sent.append(now)
        if len(sent) <= settings.SOCKET_MESSAGE_LIMIT:
            return False
        logger.warning("socket closed: message limit", extra={"groups": list(self.group_names)})
        return True

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        # The socket is server-to-client; a client frame is at most a ping. Measured before it is parsed, so a
        # huge or deeply nested frame costs nothing and never reaches the JSON decoder.
        code = self._frame_refusal(text_data)
        if code is None:
            try:
                content = json.loads(text_data)
            except ValueError:
                code = CLOSE_BAD_DATA
        if code is not None:
            # Every refusal leaves the socket's groups before it closes (`_end`).
            await self._end(code)
            return
        await self.receive_json(content)

    def _frame_refusal(self, text_data: str | None) -> int | None:
        if self._over_message_limit():
            return CLOSE_RATE_LIMITED
        if text_data is None:
            return CLOSE_BAD_DATA
        if len(text_data) > settings.WEBSOCKET_MAX_FRAME_BYTES or (
            len(text_data.encode("utf-8", "surrogatepass")) > settings.WEBSOCKET_MAX_FRAME_BYTES
        ):
            return CLOSE_TOO_BIG
        if json_nesting_exceeds(text_data, settings.WEBSOCKET_MAX_FRAME_DEPTH):
            return CLOSE_POLICY
        return None

    async def receive_json(self, content, **kwargs):
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def workflow_event(self, message):
        await self.send_json(message["event"])

    # --- following the session --------------------------------------------------------------------------------

    async def socket_session_ended(self, message):
        await self._end(CLOSE_SESSION_ENDED)

    async def socket_recheck(self, message):
        await self._recheck()

    async def _recheck(self) -> bool:
        problem = await database_sync_to_async(socket_access_problem)(
            session_key=self.session_key, user_id=self.user_id, workflow_id=self.workflow_id
        )
        if problem is None:
            return True
        await self._end(CLOSE_NOT_FOUND if problem == "not_found" else CLOSE_SESSION_ENDED)
        return False

    async def _recheck_periodically(self) -> None:
        interval = settings.WEBSOCKET_RECHECK_SECONDS
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self._recheck():
                    return
            except Exception:  # a database hiccup: try again next time rather than drop a good socket
                logger.warning("socket re-check failed", exc_info=True)

    async def _end(self, code: int) -> None:
        # Leave the groups first: no event may reach a socket that has lost its access, even while it closes.
        for group in self.group_names:
            with contextlib.suppress(Exception):
                await self.channel_layer.group_discard(group, self.channel_name)
        self.group_names = ()
        await self.close(code=code)


async def unknown_route(scope, receive, send) -> None:
    """Any socket path we do not serve (`/ws/workflows/abc/`): refused with 4404, never a 500."""
    await refuse_handshake(receive, send, code=CLOSE_NOT_FOUND)
