"""Shared helpers for chat tests."""

from __future__ import annotations

from conversations.store import conversation_key, load_conversation
from tests.waiting import wait_until

__all__ = ["HeldDispatch", "stored", "texts", "wait_until"]


def stored(workflow, generation, agent) -> list[dict]:
    return load_conversation(conversation_key(workflow.pk, generation, agent))


def texts(messages: list[dict]) -> list[str]:
    return ["".join(b.get("text", "") for b in m["blocks"] if b["type"] == "text") for m in messages]


class HeldDispatch:
    """Firings are admitted but no task reaches a worker: runs stay pending (the lane stays taken)."""

    def __init__(self, monkeypatch, settings):
        from opencompany.celery import app

        settings.AGENT_EXECUTION_MODE = "celery"
        self.sent: list[tuple[str, list]] = []
        monkeypatch.setattr(app, "send_task", lambda name, args=None, **kw: self.sent.append((name, args)))
