"""Spending limits: staff defaults, per-owner overrides and per-workflow caps, checked against the usage ledger.

`budget_reserve` runs right before every provider call of a firing. A call starts only while what was spent plus
what the calls still running reserved is under every limit that applies; it then reserves its own estimate until
its ledger row settles it. The check and the reservation are one step under the owner's lock, so calls starting
together see each other: however many start at once, only the calls admitted while there was room run, and what
is spent beyond a limit is at most what the admitted calls used beyond their estimates plus the call that crossed
it (its cost is not known before it ends). The next one is refused with `budget_exceeded`. Days and months are UTC
calendar periods. `budget_check` is the same question without reserving.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from conversations.selectors import usage_keys_billed, usage_spent

from .locks import owner_budget_lock
from .models import BudgetReservation, SpendingLimit

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
    reserved: int | Decimal = 0  # of `spent`: what calls still running reserved

    code = "budget_exceeded"

    @property
    def message(self) -> str:
        whose = "your account" if self.scope == "owner" else "this workflow"
        what = f"{self.spent} of {self.limit} tokens" if self.measure == "tokens" else f"{self.spent} of {self.limit}"
        unit = "" if self.measure == "tokens" else " in cost"
        running = f", {self.reserved} of it reserved by calls still running" if self.reserved else ""
        return (
            f"The {'daily' if self.period == 'day' else 'monthly'} spending limit of {whose} is reached "
            f"({what}{unit} used this {self.period}, UTC{running}). No request was sent to the provider; "
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


_NOTHING_RESERVED = {"tokens": 0, "cost": Decimal("0")}


def _first_exceeded(
    scope: str, limits: Limits, spent_by_period: dict, reserved: dict = _NOTHING_RESERVED
) -> BudgetExceeded | None:
    for period in ("day", "month"):
        spent = spent_by_period[period]
        prefix = "daily" if period == "day" else "monthly"
        token_limit = getattr(limits, f"{prefix}_tokens")
        tokens = spent["tokens"] + reserved["tokens"]
        if token_limit is not None and tokens >= token_limit:
            return BudgetExceeded(scope, period, "tokens", tokens, token_limit, reserved["tokens"])
        cost_limit = getattr(limits, f"{prefix}_cost")
        cost = spent["cost"] + reserved["cost"]
        if cost_limit is not None and cost >= cost_limit:
            return BudgetExceeded(scope, period, "cost", cost, cost_limit, reserved["cost"])
    return None


def budget_check(
    *, owner_id: int | None, workflow_id: int | None = None, limits_may_apply: bool = True
) -> BudgetExceeded | None:
    """None while the owner (and the workflow) may spend; else the first limit that is reached (counting what the
    calls still running reserved).

    `limits_may_apply=False`: the caller read `limits_may_apply_sql` just before and no row exists."""
    if owner_id is None or not limits_may_apply:
        return None
    rows = _limit_rows(owner_id, workflow_id)
    if not rows:
        return None  # no limit anywhere: the common case, one query
    return _exceeded(rows, owner_id, workflow_id)


def budget_reserve(
    *,
    owner_id: int | None,
    workflow_id: int | None,
    key: str,
    tokens: int,
    cost: Decimal | None,
    limits_may_apply: bool = True,
) -> BudgetExceeded | None:
    """`budget_check`, and when there is room, reserve `tokens` and `cost` (the call's estimate) under `key`, the
    idempotency key its ledger row will have, in one transaction under the owner's lock (see the module). None: the
    call may start. Nothing is reserved where no limit applies."""
    if owner_id is None or not limits_may_apply:
        return None
    with transaction.atomic():
        # Two calls of one owner (or one workflow, which is the owner's) must not both read "room left" before
        # either reserved: the check and the reservation are serialized per owner.
        owner_budget_lock(owner_id=owner_id)
        rows = _limit_rows(owner_id, workflow_id)
        if not rows:
            return None
        _settled_reservations_remove(owner_id=owner_id)
        exceeded = _exceeded(rows, owner_id, workflow_id)
        if exceeded is None:
            BudgetReservation.objects.bulk_create(
                [
                    BudgetReservation(
                        idempotency_key=key, owner_id=owner_id, workflow_id=workflow_id, tokens=tokens, cost=cost
                    )
                ],
                ignore_conflicts=True,  # a repeated attempt at the same call keeps its one reservation
            )
    return exceeded


def _exceeded(rows: list[SpendingLimit], owner_id: int, workflow_id: int | None) -> BudgetExceeded | None:
    starts = period_starts()
    limits = _owner_limits_from(rows, owner_id)
    if limits.any():
        spent = {period: usage_spent(owner_id=owner_id, since=since) for period, since in starts.items()}
        exceeded = _first_exceeded("owner", limits, spent, _outstanding(owner_id=owner_id))
        if exceeded:
            return exceeded
    if workflow_id is not None:
        limits = _limits_of(next((r for r in rows if r.workflow_id == workflow_id), None))
        if limits.any():
            spent = {
                period: usage_spent(owner_id=owner_id, since=since, workflow_id=workflow_id)
                for period, since in starts.items()
            }
            return _first_exceeded("workflow", limits, spent, _outstanding(owner_id=owner_id, workflow_id=workflow_id))
    return None


def _settled_reservations_remove(*, owner_id: int) -> None:
    """Forget the owner's reservations their ledger row settled, or too old to count (under the owner's lock)."""
    stale = timezone.now() - timedelta(seconds=settings.BUDGET_RESERVATION_TTL_SECONDS)
    rows = BudgetReservation.objects.filter(owner_id=owner_id)
    settled = usage_keys_billed(list(rows.values_list("idempotency_key", flat=True)))
    rows.filter(Q(idempotency_key__in=settled) | Q(created_at__lt=stale)).delete()


def _outstanding(*, owner_id: int, workflow_id: int | None = None) -> dict:
    """What the owner's (or the workflow's) calls still running reserved: reservations their ledger row has not
    settled yet (a call is billed once, whatever its outcome, under the key it reserved with)."""
    fresh = timezone.now() - timedelta(seconds=settings.BUDGET_RESERVATION_TTL_SECONDS)
    rows = BudgetReservation.objects.filter(owner_id=owner_id, created_at__gte=fresh)
    settled = usage_keys_billed(list(rows.values_list("idempotency_key", flat=True)))
    live = rows.exclude(idempotency_key__in=settled)
    if workflow_id is not None:
        live = live.filter(workflow_id=workflow_id)
    totals = live.aggregate(tokens=Sum("tokens"), cost=Sum("cost"))
    return {"tokens": totals["tokens"] or 0, "cost": totals["cost"] or Decimal("0")}
