"""The events the chat announces on the workflow's socket: one typed constructor per event (metadata only; the
answer's text goes as deltas, chat/delta_batcher.py), and the publishers that hand them over on commit. Run events
take their seq as they go out (chat/run_stream.py)."""

from __future__ import annotations

from django.db import transaction

from chat.run_stream import send_run_event_now
from core.hub import hub_epoch
from core.realtime import send_workflow_event_now


def run_started_event(*, workflow_id: int, kind: str, state: str, user_message_id: int) -> dict:
    return {
        "type": "run.started",
        "workflow_id": workflow_id,
        "kind": kind,
        "state": state,
        "user_message_id": user_message_id,
    }


def run_stopping_event(*, workflow_id: int, state: str) -> dict:
    return {"type": "run.stopping", "workflow_id": workflow_id, "state": state}


def run_step_event(*, workflow_id: int, step, phase: str, label: str = "") -> dict:
    """A tool call of the run started or finished (`step`: its ChatRunStep row; `label`: its line, chat.selectors
    .step_label)."""
    return {
        "type": "run.step",
        "workflow_id": workflow_id,
        "step_id": step.pk,
        "phase": phase,
        "name": step.name,
        "label": label or step.name,
        "agent_node_id": step.agent_node_id,
        "is_error": step.is_error,
    }


def run_ended_event(
    *, workflow_id: int, state: str, outcome: str, reply_message_id: int, status: str, revision: int, code: str = ""
) -> dict:
    """`run.finished` (answered or stopped) or `run.failed` (state `error`, with its `code`)."""
    event = {
        "type": "run.failed" if state == "error" else "run.finished",
        "workflow_id": workflow_id,
        "state": state,
        "outcome": outcome,
        "reply_message_id": reply_message_id,
        "status": status,
        "revision": revision,
    }
    if code:
        event["code"] = code
    return event


def chat_updated_event(*, workflow_id: int, revision: int, reason: str) -> dict:
    """The thread changed shape (a branch move, feedback, clear, reset): open pages refetch the snapshot. The hub
    epoch is added when it is sent."""
    return {"type": "chat.updated", "workflow_id": workflow_id, "revision": revision, "reason": reason}


def publish_run_event(*, workflow_id: int, run_id: int, event: dict, wait: bool = False) -> None:
    """Send a run event once the current transaction commits (a rolled-back change never announces itself).
    `wait`: the commit's later hooks (the firing's first task) run only once the event went out."""
    transaction.on_commit(lambda: send_run_event_now(workflow_id=workflow_id, run_id=run_id, event=event, wait=wait))


def publish_chat_updated(*, workflow_id: int, revision: int, reason: str) -> None:
    """Send `chat.updated` once the current transaction commits."""
    event = chat_updated_event(workflow_id=workflow_id, revision=revision, reason=reason)
    transaction.on_commit(
        lambda: send_workflow_event_now(workflow_id=workflow_id, event={**event, "hub_epoch": hub_epoch()})
    )
