"""Row locks of accounts. Every `select_for_update` of an accounts row goes through here.

Place in the lock order (docs/architecture.md#lock-order): an API token is locked alone in its transaction
(revoke), and an owner's budget lock alone in its own (the check and reservation before a provider call), outside
the numbered order: nothing else is locked with either.
"""

from __future__ import annotations

from django.db import connection

from .models import ApiToken

# The advisory-lock namespace of owners' budgets (pg_advisory_xact_lock(int, int): this class, the owner id).
BUDGET_LOCK_CLASS = 0x0B0D


def api_token_for_update(*, user, token_id: int) -> ApiToken | None:
    """One of the user's tokens, locked; None for another user's or a missing id."""
    return ApiToken.objects.select_for_update().filter(user=user, pk=token_id).first()


def owner_budget_lock(*, owner_id: int) -> None:
    """The owner's budget, locked until the transaction ends: a transaction-scoped advisory lock, since there is no
    row to lock (an owner with only the staff default has none of their own)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [BUDGET_LOCK_CLASS, int(owner_id) & 0x7FFFFFFF])
