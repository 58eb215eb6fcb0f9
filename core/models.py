from django.conf import settings
from django.db import models


class IdempotencyReceipt(models.Model):
    """The first answer to an owner action sent with an `Idempotency-Key` (core/idempotency.py).

    Written in the same transaction as the action, so a receipt exists exactly when the action's effects do.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of method, path and body")
    status_code = models.PositiveSmallIntegerField(default=0)
    body = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_receipt_user_key")]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
