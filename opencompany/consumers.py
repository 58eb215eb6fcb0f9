"""The one WebSocket per open workflow page: authenticate, check ownership, join, relay."""

import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from opencompany.errors import NotFoundError
from opencompany.hub import hub_epoch
from opencompany.realtime import workflow_group_name
from workflows.selectors import access_workflow

logger = logging.getLogger(__name__)


class WorkflowConsumer(AsyncJsonWebsocketConsumer):
    group_name: str | None = None

    async def connect(self):
        user = self.scope.get("user")
        workflow_id = self.scope["url_route"]["kwargs"]["workflow_id"]
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            await database_sync_to_async(access_workflow)(user=user, workflow_id=workflow_id)
        except NotFoundError:
            await self.close(code=4404)
            return
        try:
            await self.channel_layer.group_add(workflow_group_name(workflow_id), self.channel_name)
        except Exception:
            # Redis is unreachable: refuse cleanly (1011) so the page retries, instead of a handshake 500.
            logger.warning("socket refused: channel layer unavailable", extra={"workflow_id": workflow_id})
            await self.close(code=1011)
            return
        self.group_name = workflow_group_name(workflow_id)
        await self.accept()
        epoch = await database_sync_to_async(hub_epoch)()
        await self.send_json({"type": "hello", "workflow_id": workflow_id, "hub_epoch": epoch})

    async def disconnect(self, code):
        if self.group_name:
            await self.channel_layer.group_discard(self.group_name, self.channel_name)

    async def receive_json(self, content, **kwargs):
        # The socket is server-to-client; clients fetch snapshots over HTTP.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def workflow_event(self, message):
        await self.send_json(message["event"])
