"""API tokens (stored as hashes) and spending limits per owner."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class ApiToken(models.Model):
    """One API token of an owner. The raw key is shown once when it is made and never stored: only its SHA-256.

    A random 256-bit key needs no slow hash (nothing to brute-force), and a plain digest lets the authentication
    look the row up by an index instead of checking every row.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The first characters of the key, so an owner (and staff) can tell tokens apart without seeing one.
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token"
        verbose_name_plural = "API tokens"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["user", "revoked_at"], name="apitoken_user_active")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class SpendingLimit(models.Model):
    """Daily and monthly caps in tokens and cost. The row with no user is the staff default for every owner; a
    row with a user overrides it for that owner (a blank field there falls back to the default). A row with a
    workflow id caps that one workflow of the owner. A blank cap means no cap."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="spending_limits"
    )
    workflow_id = models.BigIntegerField(null=True, blank=True, help_text="Only this workflow of the owner.")
    daily_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    monthly_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    daily_cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    monthly_cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=Q(workflow_id__isnull=True), name="spending_limit_one_per_owner"
            ),
            models.UniqueConstraint(
                fields=["user", "workflow_id"],
                condition=Q(workflow_id__isnull=False),
                name="spending_limit_one_per_workflow",
            ),
            models.UniqueConstraint(
                fields=["workflow_id"],
                condition=Q(user__isnull=True),
                name="spending_limit_one_default",
                nulls_distinct=False,
            ),
            models.CheckConstraint(
                condition=Q(workflow_id__isnull=True) | Q(user__isnull=False), name="spending_limit_workflow_has_owner"
            ),
        ]

    def __str__(self) -> str:
        if self.user_id is None:
            return "Default for every owner"
        if self.workflow_id is not None:
            return f"Owner {self.user_id}, workflow {self.workflow_id}"
        return f"Owner {self.user_id}"


class BudgetReservation(models.Model):
    """What a provider call that has started but is not billed yet may spend (its estimate), so that calls
    starting meanwhile count it (accounts.budget.budget_reserve). Settled by the call's own ledger row, found by the
    same `idempotency_key` (`llm-step:<id>`); a settled row is removed by the next reservation of the owner."""

    idempotency_key = models.CharField(max_length=200, unique=True)
    owner_id = models.BigIntegerField()
    workflow_id = models.BigIntegerField(null=True, blank=True)
    tokens = models.PositiveBigIntegerField()
    cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner_id", "created_at"], name="budget_reservation_owner")]

    def __str__(self) -> str:
        return f"{self.idempotency_key}: {self.tokens} tokens"
