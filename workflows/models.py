from django.conf import settings
from django.db import models


class Workflow(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workflows")
    name = models.CharField(max_length=200)
    graph = models.JSONField(default=dict)
    graph_version = models.PositiveIntegerField(default=2)
    # Optimistic concurrency: a save names the revision it started from.
    revision = models.PositiveIntegerField(default=1)
    # 0 means never started: manual test runs use generation 0 and store nothing.
    live_generation = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["owner", "id"])]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


class WorkflowGeneration(models.Model):
    class State(models.TextChoices):
        LIVE = "live"
        STOPPED = "stopped"
        RESET = "reset"

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="generations")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.LIVE)
    graph = models.JSONField(default=dict)
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workflow_id", "number"]
        constraints = [models.UniqueConstraint(fields=["workflow", "number"], name="workflow_generation_unique_number")]

    def __str__(self) -> str:
        return f"{self.workflow_id} gen {self.number} ({self.state})"
