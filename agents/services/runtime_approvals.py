"""A tool that asks first, called from inside an agent runtime's run (Claude Code through the tool bridge, Vertex
and RLM from the worker): the run cannot be parked between its own tool calls, so the tool's thread waits
for the owner's decision while the run waits for the tool (docs/tools.md#approvals).

The call gets its `ToolApproval` and its card like a native one; the thread polls the row. No decision within
TOOL_APPROVAL_RUNTIME_TIMEOUT_SECONDS (or before the run's own time is up) counts as Deny and says so; Stop
closes it. The run's step is never re-sent, so an approved call is made once.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.utils import timezone

from agents.models import Firing, ToolApproval
from agents.services.approvals import approval_request, declined_outcome, duration_words
from agents.services.heartbeat import stop_requested
from agents.tools import ToolOutcome

STOPPED_TEXT = "Not run: the owner stopped this answer."


def runtime_call_decision(firing: Firing, binding: dict, call: dict) -> ToolOutcome | None:
    """Wait for the owner's decision on a runtime's call; None once approved (the caller makes the call), else the
    tool result saying why it was not made."""
    approval = approval_request(firing, firing.iteration + 1, call, binding)
    left = (firing.deadline_at - timezone.now()).total_seconds() if firing.deadline_at else None
    wait = (
        settings.TOOL_APPROVAL_RUNTIME_TIMEOUT_SECONDS
        if left is None
        else min(left, settings.TOOL_APPROVAL_RUNTIME_TIMEOUT_SECONDS)
    )
    give_up_at = time.monotonic() + max(wait, 0)
    pending = ToolApproval.objects.filter(pk=approval.pk, state=ToolApproval.State.PENDING)
    while pending.exists():
        if stop_requested(firing.pk):
            pending.update(state=ToolApproval.State.CANCELLED, decided_at=timezone.now(), reason=STOPPED_TEXT)
            break
        if time.monotonic() >= give_up_at:
            reason = f"No decision within {duration_words(int(wait))}: counted as declined."
            pending.update(state=ToolApproval.State.EXPIRED, decided_at=timezone.now(), reason=reason)
            break
        time.sleep(settings.AGENT_STOP_POLL_SECONDS)
    approval.refresh_from_db()
    if approval.state == ToolApproval.State.APPROVED:
        return None
    return declined_outcome(approval) or ToolOutcome(STOPPED_TEXT, is_error=True)
