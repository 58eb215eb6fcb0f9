"""The spending-limit gate of a provider call (accounts.budget decides; this ends the firing when it refuses)."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from accounts.budget import budget_check, limits_may_apply_sql
from agents.locks import firing_for_update
from agents.models import Firing, LlmStep
from agents.services.firings import firing_end

logger = logging.getLogger("agents.step")


def refuse_step_over_budget(firing: Firing, step: LlmStep, *, limits_may_apply: bool = True) -> bool:
    """True when the owner's (or the workflow's) spending limit is reached: the claimed step is marked failed
    without a provider call, and the firing ends with `budget_exceeded`, which the chat shows the owner.

    `limits_may_apply`: what the step's claim read (`step_claim_budget_sql`); False skips the check's query."""
    exceeded = budget_check(
        owner_id=firing.workflow.owner_id, workflow_id=firing.workflow_id, limits_may_apply=limits_may_apply
    )
    if exceeded is None:
        return False
    with transaction.atomic():
        locked = firing_for_update(firing.pk)  # the firing before its step (lock order 2)
        updated = LlmStep.objects.filter(pk=step.pk, state=LlmStep.State.STARTED).update(
            state=LlmStep.State.FAILED, error_code=exceeded.code, finished_at=timezone.now(), duration_ms=0
        )
        if updated:
            firing_end(
                locked,
                state=Firing.State.FAILED,
                end_reason=exceeded.code,
                error_code=exceeded.code,
                error_message=exceeded.message,
                final_text=exceeded.message,
            )
    logger.info(
        "provider call refused: spending limit",
        extra={"firing_id": str(firing.pk), "scope": exceeded.scope, "period": exceeded.period},
    )
    return True


def step_claim_budget_sql(firing: Firing) -> tuple[str, list]:
    """What a step's claim returns beside its id so that `refuse_step_over_budget` needs no query of its own in the
    common case: whether any spending limit row may apply to the firing's owner and workflow."""
    return limits_may_apply_sql(owner_id=firing.workflow.owner_id, workflow_id=firing.workflow_id)
