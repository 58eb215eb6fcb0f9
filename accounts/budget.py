"""Spending limits: staff defaults, per-owner overrides and per-workflow caps, checked against the usage ledger.

`budget_check` runs right before every provider call of a firing. A call starts only while what was spent is
under every limit that applies; the call that crosses a limit finishes (its cost is not known before it ends),
and the next one is refused with `budget_exceeded`. Days and months are UTC calendar periods.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from conversations.selectors import usage_spent

from .models import SpendingLimit

LIMIT_FIELDS = ("daily_tokens", "monthly_tokens", "daily_cost", "monthly_cost")


@dataclass(frozen=True)
class Limits:
    daily_tokens: int | None = None
    monthly_tokens: int | None = None
    daily_cost: Decimal | None = None
    monthly_cost: Decimal | None = None

    def any(self) -> bool:
        return any(getattr(self, name) is not None for name in LIMIT_FIELDS)


@dataclass(frozen=True)
class BudgetExceeded:
    scope: str  # "owner" or "workflow"
    period: str  # "day" or "month"
    measure: str  # "tokens" or "cost"
    spent: int | Decimal
    limit: int | Decimal

    code = "budget_exceeded"

    @property
    def message(self) -> str:
        whose = "your account" if self.scope == "owner" else "this workflow"
        what = f"{self.spent} of {self.limit} tokens" if self.measure == "tokens" else f"{self.spent} of {self.limit}"
        unit = "" if self.measure == "tokens" else " in cost"
        return (
            f"The {'daily' if self.period == 'day' else 'monthly'} spending limit of {whose} is reached "
            f"({what}{unit} used this {self.period}, UTC). No request was sent to the provider; "
            "the limit resets at the start of the next period, or staff can raise it."
        )


def period_starts(now: datetime | None = None) -> dict[str, datetime]:
    now = timezone.now() if now is None else now
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return {"day": day, "month": day.replace(day=1)}


def _limits_of(row: SpendingLimit | None) -> Limits:
    return Limits(**{name: getattr(row, name) for name in LIMIT_FIELDS}) if row else Limits()


def _owner_limits_from(rows: list[SpendingLimit], owner_id: int) -> Limits:
    """The owner's override where it sets a field, else the staff default (`rows`: any of the owner's rows)."""
    default = next((r for r in rows if r.user_id is None and r.workflow_id is None), None)
    override = next((r for r in rows if r.user_id == owner_id and r.workflow_id is None), None)
    values = {}
    for name in LIMIT_FIELDS:
        value = getattr(override, name, None) if override else None
        values[name] = value if value is not None else (getattr(default, name, None) if default else None)
    return Limits(**values)


def _limit_rows(owner_id: int, workflow_id: int | None = None) -> list[SpendingLimit]:
    """Every row that can apply, in one query (it runs before every provider call): the staff default, the
    owner's override and, with `workflow_id`, that workflow's cap."""
    scope = Q(user_id=owner_id, workflow_id__isnull=True) | Q(user__isnull=True, workflow_id__isnull=True)
    if workflow_id is not None:
        scope |= Q(user_id=owner_id, workflow_id=workflow_id)
    return list(SpendingLimit.objects.filter(scope))


def limits_may_apply_sql(*, owner_id: int, workflow_id: int) -> tuple[str, list]:
    """An SQL boolean (with its params): does any row `budget_check` reads exist? For a caller that sends a statement
    right before the check anyway (the runtime's step claim) and so learns, in that statement, that the common case
    — no limit anywhere — needs no query of its own. The same rows as `_limit_rows`."""
    return (
        f"EXISTS (SELECT 1 FROM {SpendingLimit._meta.db_table} WHERE (workflow_id IS NULL AND (user_id = %s "
        "OR user_id IS NULL)) OR (user_id = %s AND workflow_id = %s))",
        [owner_id, owner_id, workflow_id],
    )


def owner_limits(*, owner_id: int) -> Limits:
    """The owner's override where it sets a field, else the staff default."""
    return _owner_limits_from(_limit_rows(owner_id), owner_id)


def _first_exceeded(scope: str, limits: Limits, spent_by_period: dict) -> BudgetExceeded | None:
    for period in ("day", "month"):
        spent = spent_by_period[period]
        prefix = "daily" if period == "day" else "monthly"
        token_limit = getattr(limits, f"{prefix}_tokens")
        if token_limit is not None and spent["tokens"] >= token_limit:
            return BudgetExceeded(scope, period, "tokens", spent["tokens"], token_limit)
        cost_limit = getattr(limits, f"{prefix}_cost")
        if cost_limit is not None and spent["cost"] >= cost_limit:
            return BudgetExceeded(scope, period, "cost", spent["cost"], cost_limit)
    return None


def budget_check(
    *, owner_id: int | None, workflow_id: int | None = None, limits_may_apply: bool = True
) -> BudgetExceeded | None:
    """None while the owner (and the workflow) may spend; else the first limit that is reached.

    `limits_may_apply=False`: the caller read `limits_may_apply_sql` just before and no row exists."""
    if owner_id is None or not limits_may_apply:
        return None
    rows = _limit_rows(owner_id, workflow_id)
    if not rows:
        return None  # no limit anywhere: the common case, one query
    starts = period_starts()
    limits = _owner_limits_from(rows, owner_id)
    if limits.any():
        spent = {period: usage_spent(owner_id=owner_id, since=since) for period, since in starts.items()}
        exceeded = _first_exceeded("owner", limits, spent)
        if exceeded:
            return exceeded
    if workflow_id is not None:
        limits = _limits_of(next((r for r in rows if r.workflow_id == workflow_id), None))
        if limits.any():
            spent = {
                period: usage_spent(owner_id=owner_id, since=since, workflow_id=workflow_id)
                for period, since in starts.items()
            }
            return _first_exceeded("workflow", limits, spent)
    return None
