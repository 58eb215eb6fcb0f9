"""The one place that sends realtime events.

Events go to the group of one workflow; only sockets of that workflow's owner may join it
(see consumers.py). Sending happens on commit so a rolled-back write never announces
itself, and a broker failure is logged, never raised: the durable write already happened.
"""

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def workflow_group_name(workflow_id: int) -> str:
    return f"workflow.{int(workflow_id)}"


def send_workflow_event_now(*, workflow_id: int, event: dict) -> bool:
    """Send immediately (outside any transaction, e.g. streaming deltas). Returns False on failure."""
    try:
        layer = get_channel_layer()
        if layer is None:
            return False
        async_to_sync(layer.group_send)(workflow_group_name(workflow_id), {"type": "workflow.event", "event": event})
        return True
    except Exception:  # a broadcast must never fail the caller
        logger.warning("broadcast failed", extra={"workflow_id": workflow_id, "event_type": event.get("type")})
        return False


def publish_workflow_event(*, workflow_id: int, event: dict) -> None:
    """Queue `event` for the workflow owner's sockets once the current transaction commits."""
    transaction.on_commit(lambda: send_workflow_event_now(workflow_id=workflow_id, event=event))
