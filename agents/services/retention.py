"""Pruning what ended firings leave behind.

A finished firing keeps no message list (its turn is in the store), but its row, steps and tool results stay
for run history and for idempotency while anything could still deliver a step of it. Past the retention period
they go, in batches; billing is not touched (the usage ledger keeps its own rows, with no reference to them).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from agents.models import Firing
from conversations.store import prune_retained

_BATCH = 500


def firings_prune(*, now=None) -> int:
    """Delete terminal top-level firings that ended before the retention period (their teammates, steps and tool
    results go with them); returns how many firings were deleted. Also drops conversation copies the store kept
    for leases that were never released."""

    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.AGENT_FIRING_RETENTION_DAYS)
    deleted = 0
    while True:
        batch = list(
            Firing.objects.filter(
                parent__isnull=True, state__in=Firing.TERMINAL_STATES, finished_at__lt=cutoff
            ).values_list("pk", flat=True)[:_BATCH]
        )
        if not batch:
            break
        # A teammate still running under an ended parent (never expected) keeps the whole tree.
        live_children = set(
            Firing.objects.filter(parent_id__in=batch)
            .exclude(state__in=Firing.TERMINAL_STATES)
            .values_list("parent_id", flat=True)
        )
        doomed = [pk for pk in batch if pk not in live_children]
        if not doomed:
            break
        deleted += Firing.objects.filter(pk__in=doomed).delete()[1].get(Firing._meta.label, 0)
    prune_retained(older_than=now - timedelta(seconds=2 * settings.AGENT_MAX_WALL_SECONDS))
    return deleted
