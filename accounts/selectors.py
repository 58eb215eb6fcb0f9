"""Reads for the usage page and API: what an owner spent this day and month, against their limits."""

from __future__ import annotations

from conversations.selectors import usage_by_workflow, usage_spent
from workflows.selectors import workflows_for_owner

from .budget import owner_limits, period_starts


def usage_summary(*, user) -> dict:
    starts = period_starts()
    limits = owner_limits(owner_id=user.pk)
    periods = []
    for period, since in starts.items():
        spent = usage_spent(owner_id=user.pk, since=since)
        prefix = "daily" if period == "day" else "monthly"
        token_limit = getattr(limits, f"{prefix}_tokens")
        cost_limit = getattr(limits, f"{prefix}_cost")
        periods.append(
            {
                "period": period,
                "since": since,
                "tokens": spent["tokens"],
                "cost": spent["cost"],
                "token_limit": token_limit,
                "cost_limit": cost_limit,
                "over": (token_limit is not None and spent["tokens"] >= token_limit)
                or (cost_limit is not None and spent["cost"] >= cost_limit),
            }
        )
    by_workflow = usage_by_workflow(owner_id=user.pk, since=starts["month"])
    # The ledger outlives a deleted workflow: its rows stay, shown by number.
    names = dict(workflows_for_owner(user=user).values_list("id", "name"))
    for row in by_workflow:
        row["workflow_name"] = names.get(row["workflow_id"])
    return {"periods": periods, "by_workflow": by_workflow}
