"""Tool calls that ask first: the firing parks until the owner decides (docs/tools.md#approvals).

Persist reaches a call whose binding asks first (`binding["approval"]`): under the firing's lock it records a
`ToolApproval` (`pending`, once per call), answers every other call of the step as usual, and parks the firing in
`awaiting_approval`: the state is written, the conversation's lease released, and nothing else holds it (no
worker, task, lease or connection). A decision (`approval_decisions.py`) is committed before anything acts on it,
then sends `agent.persist_turn` again; the watchdog sends it for a decision whose message was lost. Persist then
makes an approved call once (a remote one recorded `started` first, `remote_tools.py`), answers a denied, expired
or cancelled one with a tool result saying so, and, once no call waits, takes the lease again and goes on.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents import observers
from agents.models import Firing, ToolApproval
from agents.services.firings import firing_key, firing_mark_changed, firing_write_along
from agents.tools import ToolOutcome
from conversations import store

CANCELLED_REASON = "The answer was stopped before a decision."


def duration_words(seconds: int) -> str:
    """A timeout in words: "24 hours", "5 minutes", "30 seconds"."""
    if seconds < 60:
        return f"{seconds} second" + ("s" if seconds != 1 else "")
    if seconds % 3600 == 0:
        count = seconds // 3600
        return f"{count} hour" + ("s" if count != 1 else "")
    count = max(1, round(seconds / 60))
    return f"{count} minute" + ("s" if count != 1 else "")


def expired_reason() -> str:
    return f"No decision within {duration_words(settings.TOOL_APPROVAL_TIMEOUT_SECONDS)}: counted as declined."


def asks_first(binding: dict | None, call: dict) -> bool:
    """Whether this call waits for the owner. A call whose arguments could not be read never reaches its tool, so it
    is answered with that error at once instead of asking."""
    return bool(binding and binding.get("approval")) and isinstance(call.get("arguments"), dict)


def approvals_of(firing: Firing, iteration: int) -> dict[str, ToolApproval]:
    """{tool call id: its approval} for one step; no query for a firing none of whose tools asks first."""
    if not any(b.get("approval") for b in firing.tool_bindings or []):
        return {}
    return {a.tool_call_id: a for a in ToolApproval.objects.filter(firing_id=firing.pk, iteration=iteration)}


def may_call(binding: dict, call: dict, approvals: dict[str, ToolApproval]) -> bool:
    """Whether the call may be made now: it does not ask first, or the owner approved it."""
    if not asks_first(binding, call):
        return True
    approval = approvals.get(call["id"])
    return approval is not None and approval.state == ToolApproval.State.APPROVED


def approval_request(firing: Firing, iteration: int, call: dict, binding: dict) -> ToolApproval:
    """The call's approval, recorded `pending` when it is new (under the firing's lock, in persist's transaction);
    the chat is told on commit."""
    now = timezone.now()
    try:
        with transaction.atomic():
            approval = ToolApproval.objects.create(
                firing=firing,
                iteration=iteration,
                tool_call_id=call["id"],
                name=call.get("name", "")[:200],
                node_id=binding.get("node_id", ""),
                # The call's arguments, as the step kept the model's answer (the call made is that step's).
                arguments=json.dumps(call["arguments"], ensure_ascii=False),
                expires_at=now + timedelta(seconds=settings.TOOL_APPROVAL_TIMEOUT_SECONDS),
            )
    except IntegrityError:
        return ToolApproval.objects.get(firing=firing, tool_call_id=call["id"])
    if firing.chat_run_id:
        observers.notify_approval(firing=firing, approval=approval)
    return approval


def declined_outcome(approval: ToolApproval) -> ToolOutcome | None:
    """The tool result of a call the owner did not approve (None while it waits, or once approved)."""
    reason = approval.reason.strip()
    if approval.state == ToolApproval.State.DENIED:
        said = f" Their reason: {reason}" if reason else " They gave no reason."
        return ToolOutcome(f"Not run: the owner declined this call.{said}", is_error=True)
    if approval.state == ToolApproval.State.EXPIRED:
        return ToolOutcome(f"Not run: the owner did not approve this call. {reason}", is_error=True)
    if approval.state == ToolApproval.State.CANCELLED:
        return ToolOutcome("Not run: the owner stopped this answer.", is_error=True)
    return None


def approvals_cancel_pending(firing: Firing) -> int:
    """A stopped (or ended) firing's undecided calls: closed, so a late decision finds them decided (409)."""
    return ToolApproval.objects.filter(firing_id=firing.pk, state=ToolApproval.State.PENDING).update(
        state=ToolApproval.State.CANCELLED, decided_at=timezone.now(), reason=CANCELLED_REASON
    )


def firing_park(firing: Firing) -> None:
    """Park a locked firing whose step waits for decisions: written on this transaction's commit with its release of
    the conversation's lease (nothing may hold a lease for a day; `firing_unpark` takes it again)."""
    if firing.state == Firing.State.AWAITING_APPROVAL:
        return
    firing.state = Firing.State.AWAITING_APPROVAL
    firing_mark_changed(firing, "state")
    if firing.uses_conversation and firing.lease_token:
        firing_write_along(
            firing, store.release_firing_lease_statements(firing_key(firing), owner_token=firing.lease_token)
        )


def firing_unpark(firing: Firing, iteration: int, *, stopped: bool) -> bool:
    """Every call of a parked firing's step is decided: take the conversation's lease again and give the firing back
    the time it waited (its wall-time limit counts working time). False when another firing holds the lease now:
    the firing stays parked and the watchdog sends persist again later. A stopped firing ends without it."""
    if firing.uses_conversation and firing.lease_token:
        taken = store.acquire_firing_lease(
            firing_key(firing), owner_token=firing.lease_token, ttl_seconds=settings.FIRING_LEASE_TTL_SECONDS
        )
        if not taken and not stopped:
            return False
    first = (
        ToolApproval.objects.filter(firing_id=firing.pk, iteration=iteration)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    if firing.deadline_at and first is not None:
        firing.deadline_at += timezone.now() - first
        firing_mark_changed(firing, "deadline_at")
    return True
