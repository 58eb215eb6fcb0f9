"""Triggers that start turns by themselves (docs/triggers.md): a schedule's due time, and the history of every
fire. Writes live in services.py; nothing here starts work."""

from django.db import models
from django.db.models import Q


class Schedule(models.Model):
    """One `scheduleTrigger` node of a workflow's live generation. `next_due_at` NULL: paused (the workflow is
    stopped). The params are a copy of the generation's snapshot, so the sweep reads no graph."""

    workflow = models.ForeignKey("workflows.Workflow", on_delete=models.CASCADE, related_name="+")
    node_id = models.CharField(max_length=200)
    generation = models.PositiveIntegerField()
    name = models.CharField(max_length=200, blank=True, default="")
    cron = models.CharField(max_length=200, blank=True, default="")
    every_minutes = models.PositiveIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    message = models.TextField(blank=True, default="")
    # When the schedule was (re)started: an interval counts from here, so its due times do not drift.
    anchor_at = models.DateTimeField()
    next_due_at = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    last_missed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workflow", "node_id"], name="triggers_schedule_one_per_node")]
        indexes = [
            models.Index(fields=["next_due_at"], condition=Q(next_due_at__isnull=False), name="triggers_schedule_due")
        ]

    def __str__(self) -> str:
        return f"schedule {self.node_id} of workflow {self.workflow_id}"


class Webhook(models.Model):
    """The address of one `webhookTrigger` node: `/hooks/<id>/`. Only the id's SHA-256 is kept; the id itself is
    shown once, when it is made (Regenerate makes a new one and the old one stops working)."""

    workflow = models.ForeignKey("workflows.Workflow", on_delete=models.CASCADE, related_name="+")
    node_id = models.CharField(max_length=200)
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=8, blank=True, default="")  # the id's last characters, to tell hooks apart
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workflow", "node_id"], name="triggers_webhook_one_per_node")]

    def __str__(self) -> str:
        return f"webhook {self.node_id} of workflow {self.workflow_id} (…{self.hint})"


class TriggerFire(models.Model):
    """One time a trigger fired: the turn it started in the owner's chat, or why it started none."""

    class Kind(models.TextChoices):
        SCHEDULE = "schedule"
        WEBHOOK = "webhook"

    class State(models.TextChoices):
        QUEUED = "queued"  # claimed; its task hands it to the chat
        WAITING = "waiting"  # the answering agent was busy; the sweep hands it again
        FIRED = "fired"  # a chat run answers it (`chat_run_id`)
        SKIPPED = "skipped"  # not run: `error_code` says why (busy, stopped, reset)
        FAILED = "failed"  # the chat refused it: `error_code`

    PENDING_STATES = (State.QUEUED, State.WAITING)

    # The fire belongs to its schedule's row (deleted with it). Only that reference, no workflow key: the sweep
    # inserts fires under the schedule's lock and must not queue behind a Start that holds the workflow row.
    schedule = models.ForeignKey(Schedule, null=True, blank=True, on_delete=models.CASCADE, related_name="fires")
    webhook = models.ForeignKey(Webhook, null=True, blank=True, on_delete=models.CASCADE, related_name="fires")
    # A webhook delivery's Idempotency-Key (or delivery-id header): a retried delivery finds this fire.
    delivery_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    # The message the agent receives, made when the fire was recorded.
    text = models.TextField(blank=True, default="")
    workflow_id = models.BigIntegerField(db_index=True)
    node_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=200, blank=True, default="")
    due_at = models.DateTimeField(null=True, blank=True)
    # Due times that passed while nothing swept (downtime): this fire stands for them too.
    missed = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    chat_run_id = models.BigIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["webhook", "delivery_key"],
                condition=Q(delivery_key__isnull=False),
                name="triggers_fire_delivery_once",
            )
        ]
        indexes = [
            models.Index(fields=["state"], condition=Q(state__in=["queued", "waiting"]), name="triggers_fire_pending")
        ]

    def __str__(self) -> str:
        return f"{self.kind} fire {self.pk} ({self.state})"
