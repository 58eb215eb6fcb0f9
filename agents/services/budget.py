"""The spending-limit gate of a provider call (accounts.budget decides and reserves the call's estimate; this ends
the firing when it refuses)."""

from __future__ import annotations

import json
import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.budget import budget_reserve, limits_may_apply_sql
from agents.locks import firing_for_update
from agents.models import Firing, LlmStep
from agents.services.firings import firing_end
from conversations.estimates import BYTES_PER_TOKEN
from providers.billing import ledger_fields

logger = logging.getLogger("agents.step")


def refuse_step_over_budget(
    firing: Firing, step: LlmStep, *, messages: list[dict], limits_may_apply: bool = True
) -> bool:
    """True when the owner's (or the workflow's) spending limit is reached, counting what the calls still running
    reserved: the claimed step is marked failed without a provider call, and the firing ends with
    `budget_exceeded`, which the chat shows the owner. False: the call may start, its estimate reserved until its
    ledger row (`llm-step:<id>`, whatever the outcome) settles it.

    `limits_may_apply`: what the step's claim read (`step_claim_budget_sql`); False skips the check's query."""
    if not limits_may_apply:
        return False  # no limit row anywhere: nothing to check or reserve, and no estimate to make
    tokens, cost = step_estimate(firing, messages)
    exceeded = budget_reserve(
        owner_id=firing.workflow.owner_id,
        workflow_id=firing.workflow_id,
        key=f"llm-step:{step.pk}",
        tokens=tokens,
        cost=cost,
        limits_may_apply=limits_may_apply,
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


def step_estimate(firing: Firing, messages: list[dict]):
    """(tokens, cost) a step's call may use: its messages at 4 bytes a token plus the agent's output cap (or
    BUDGET_RESERVATION_OUTPUT_TOKENS), priced as the ledger would price them (None for a model without a price)."""
    config = firing.agent_config or {}
    size = len(json.dumps(messages, ensure_ascii=False, default=str).encode())
    input_tokens = size // BYTES_PER_TOKEN + 1
    output_tokens = int(config.get("max_output_tokens") or settings.BUDGET_RESERVATION_OUTPUT_TOKENS)
    fields = ledger_fields(
        provider=str(config.get("provider") or "unknown"),
        model=str(config.get("model") or "unknown"),
        usage={"input_tokens": input_tokens, "output_tokens": output_tokens},
    )
    return input_tokens + output_tokens, fields["cost"]


def step_claim_budget_sql(firing: Firing) -> tuple[str, list]:
    """What a step's claim returns beside its id so that `refuse_step_over_budget` needs no query of its own in the
    common case: whether any spending limit row may apply to the firing's owner and workflow."""
    return limits_may_apply_sql(owner_id=firing.workflow.owner_id, workflow_id=firing.workflow_id)
