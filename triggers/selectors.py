"""Reads of the triggers."""

from __future__ import annotations

from .models import Webhook


def webhook_address_state(*, workflow, node_id: str) -> dict:
    hook = Webhook.objects.filter(workflow=workflow, node_id=node_id).first()
    return {"exists": hook is not None, "hint": hook.hint if hook else "", "url": None}
