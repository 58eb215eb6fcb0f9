"""The owner's decisions on tool calls that ask first, their timeout, and Stop of a parked firing.

A decision is one conditional update of the approval row (`pending` -> approved / denied): of two racing decisions
(two tabs, a double click, Approve against Deny) exactly one changes the row; the other is told the decision that
stands (409). It is committed before anything acts on it; its commit sends `agent.persist_turn`, which makes the
call or tells the model it was declined (agents/services/approvals.py). A decision whose message was lost (the
web process died after its commit) is found by the watchdog (`parked_firings_resume`).
"""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import observers
from agents.dispatch import enqueue_step
from agents.models import Firing, ToolApproval
from agents.services.approvals import expired_reason
from agents.services.firings import firing_request_stop
from agents.services.persist import persist_turn
from core.errors import ConflictError, NotFoundError, ServiceError

logger = logging.getLogger("agents.approvals")

APPROVE, DENY = "approve", "deny"
NOT_FOUND = "That tool call is not waiting for you."
STATE_WORDS = {
    ToolApproval.State.APPROVED: "approved",
    ToolApproval.State.DENIED: "declined",
    ToolApproval.State.EXPIRED: "declined because no decision came in time",
    ToolApproval.State.CANCELLED: "closed because the answer was stopped",
}


def owned_approval(*, approval_id, owner) -> ToolApproval:
    """The approval with that id on one of `owner`'s workflows; another owner's, a missing one or a malformed id is
    not found."""
    try:
        pk = uuid.UUID(str(approval_id))
    except ValueError:
        raise NotFoundError("not_found", NOT_FOUND) from None
    approval = (
        ToolApproval.objects.select_related("firing", "firing__workflow", "decided_by")
        .filter(pk=pk, firing__workflow__owner=owner)
        .first()
    )
    if approval is None:
        raise NotFoundError("not_found", NOT_FOUND)
    return approval


def tool_approval_decide(*, approval_id, owner, decision: str, reason: str = "") -> ToolApproval:
    """Approve or deny one call. Exactly one decision stands: a later one (or one after the timeout or a Stop) is a
    409 `already_decided` carrying the decision that stands."""
    approval = owned_approval(approval_id=approval_id, owner=owner)
    if decision not in (APPROVE, DENY):
        raise ServiceError("invalid_request", "The decision is `approve` or `deny`.")
    reason = (reason or "").strip()
    if len(reason) > settings.TOOL_APPROVAL_REASON_MAX_CHARS:
        raise ServiceError(
            "invalid_request", f"A reason can be at most {settings.TOOL_APPROVAL_REASON_MAX_CHARS} characters."
        )
    state = ToolApproval.State.APPROVED if decision == APPROVE else ToolApproval.State.DENIED
    with transaction.atomic():
        now = timezone.now()
        # The one write that decides: a racing decision waits for this row and then finds it no longer pending.
        won = ToolApproval.objects.filter(pk=approval.pk, state=ToolApproval.State.PENDING, expires_at__gt=now).update(
            state=state, decided_by=owner, decided_at=now, reason=reason
        )
        if won:
            _continue_after_decision(approval.pk)  # on commit: the decision is durable before anything acts on it
        else:
            _expire_one(approval.pk, now)  # past its timeout but not swept yet: it counts as declined now
    approval.refresh_from_db()
    if not won:
        raise ConflictError(
            "already_decided",
            f"This call was already {STATE_WORDS.get(approval.state, approval.state)}.",
            extra={"approval": approval_decision_data(approval)},
        )
    logger.info(
        "tool call decided",
        extra={"firing_id": str(approval.firing_id), "tool": approval.name, "state": approval.state},
    )
    return approval


def _expire_one(approval_id, now) -> bool:
    """Expire one pending approval past its timeout and continue its firing (on commit); False when it was not
    pending or not past it."""
    with transaction.atomic():
        expired = ToolApproval.objects.filter(
            pk=approval_id, state=ToolApproval.State.PENDING, expires_at__lte=now
        ).update(state=ToolApproval.State.EXPIRED, decided_at=now, reason=expired_reason())
        if expired:
            _continue_after_decision(approval_id)
    return bool(expired)


def _continue_after_decision(approval_id) -> None:
    approval = ToolApproval.objects.select_related("firing").get(pk=approval_id)
    enqueue_step("agent.persist_turn", str(approval.firing_id), approval.iteration)
    if approval.firing.chat_run_id:
        observers.notify_approval(firing=approval.firing, approval=approval)


def approval_decision_data(approval: ToolApproval) -> dict:
    return {
        "id": str(approval.pk),
        "state": approval.state,
        "decided_by": approval.decided_by.get_username() if approval.decided_by_id and approval.decided_by else None,
        "decided_at": approval.decided_at,
        "reason": approval.reason,
    }


def tool_approvals_expire(*, now=None) -> int:
    """The watchdog's sweep: every call past its timeout without a decision counts as declined (and says so)."""
    now = now or timezone.now()
    due = ToolApproval.objects.filter(state=ToolApproval.State.PENDING, expires_at__lte=now)
    return sum(_expire_one(pk, now) for pk in due.values_list("pk", flat=True))


def firing_stop(*, firing_id) -> bool:
    """Stop a firing (and the teammates it waits for), as `firing_request_stop`; a firing parked for decisions has
    no worker to notice, so its persist runs here: its waiting calls are answered `Not run` and it ends now (a call
    the owner approved that is running ends it when it returns). Returns False when it had already ended."""
    requested = firing_request_stop(firing_id=firing_id)
    if not requested:
        return False
    for parked_id, iteration in _parked_in_tree(firing_id):
        try:
            persist_turn(str(parked_id), iteration)
        except Exception:  # the watchdog's resume sends it again; Stop itself was recorded
            logger.exception("stopping a parked firing failed", extra={"firing_id": str(parked_id)})
    return True


def _parked_in_tree(firing_id) -> list[tuple]:
    """The parked firings among `firing_id` and the teammates under it, deepest first (a teammate's end continues its
    parent)."""
    found, level = [], [firing_id]
    while level:
        found = (
            list(
                Firing.objects.filter(pk__in=level, state=Firing.State.AWAITING_APPROVAL).values_list("pk", "iteration")
            )
            + found
        )
        level = list(
            Firing.objects.filter(parent_id__in=level)
            .exclude(state__in=Firing.TERMINAL_STATES)
            .values_list("pk", flat=True)
        )
    return found
