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
    # {node type: highest canonical n ever given}: a deleted node's id is never handed to a new node.
    node_numbers = models.JSONField(default=dict, blank=True)
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
        SUPERSEDED = "superseded"

    class AdmittedBy(models.TextChoices):
        START = "start"
        RESET = "reset"

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="generations")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.LIVE)
    graph = models.JSONField(default=dict)
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    admitted_by = models.CharField(max_length=16, choices=AdmittedBy.choices, default=AdmittedBy.START)
    # The workflow revision the snapshot was taken from: Start with an unchanged graph admits nothing new.
    graph_revision = models.PositiveIntegerField(default=0)
    # For a generation admitted by Reset: the generation it replaced, so a retried reset is recognised.
    reset_from = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["workflow_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["workflow", "number"], name="workflow_generation_unique_number"),
            # The running generation is the live one: never two at once.
            models.UniqueConstraint(
                fields=["workflow"], condition=models.Q(state="live"), name="workflow_generation_one_live"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id} gen {self.number} ({self.state})"


class ArchiveOutbox(models.Model):
    """A pending archive job: conversations to clear after a Context was removed or a workflow deleted.

    Written in the same transaction as the change that needs it, so the job exists exactly when the change
    committed; `workflows.drain_archive_outbox` claims rows with a conditional update and runs the registered
    archive listeners. `workflow_id` is a plain integer because the row must outlive a deleted workflow."""

    class Reason(models.TextChoices):
        CONTEXT_REMOVED = "context_removed"
        CONTEXT_CLEARED = "context_cleared"
        WORKFLOW_DELETED = "workflow_deleted"

    class State(models.TextChoices):
        PENDING = "pending"
        PROCESSING = "processing"
        DONE = "done"
        FAILED = "failed"

    workflow_id = models.BigIntegerField(db_index=True)
    reason = models.CharField(max_length=32, choices=Reason.choices)
    # {"context_node_ids": [...], "agent_node_ids": [...]}: ids only, never content.
    payload = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "archive outbox entry"
        verbose_name_plural = "archive outbox entries"
        ordering = ["id"]
        indexes = [models.Index(fields=["state", "id"], name="workflow_archive_state_idx")]

    def __str__(self) -> str:
        return f"archive #{self.pk} workflow {self.workflow_id} {self.reason} ({self.state})"


class LegacyImportRecord(models.Model):
    """An immutable `legacy_partial` record: a Markdown transcript kept from the old memory design.

    Never turned into Memory items and never fed to a provider; kept so nothing the owner had is silently lost."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="legacy_imports")
    kind = models.CharField(max_length=32, default="legacy_partial", editable=False)
    agent_node_id = models.CharField(max_length=255, editable=False)
    context_node_id = models.CharField(max_length=255, editable=False)
    memory_node_id = models.CharField(max_length=255, editable=False)
    transcript = models.TextField(editable=False)
    digest = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # Normalizing the same legacy graph twice (a retried save) keeps one record.
            models.UniqueConstraint(fields=["workflow", "agent_node_id", "digest"], name="workflow_legacy_import_once")
        ]

    def __str__(self) -> str:
        return f"legacy_partial for {self.agent_node_id}"


class TodoItem(models.Model):
    """One entry of a `todos` node's checklist (the `todos` tool)."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="todo_items")
    node_id = models.CharField(max_length=255)
    text = models.TextField()
    done = models.BooleanField(default=False)
    order = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["workflow_id", "node_id", "order", "id"]
        indexes = [models.Index(fields=["workflow", "node_id", "order"], name="workflow_todo_list_idx")]

    def __str__(self) -> str:
        return f"{'[x]' if self.done else '[ ]'} {self.text[:40]}"
