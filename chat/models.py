"""The owner's chat (docs/chat.md): one session per workflow, a tree of messages, runs in one lane, branch snapshots,
notes to the agent and feedback.

Writes live in chat/services/; nothing here starts work or sends events.
"""

from django.db import models
from django.db.models import Q


class ChatSession(models.Model):
    workflow = models.OneToOneField("workflows.Workflow", on_delete=models.CASCADE, related_name="chat_session")
    # The leaf of the path shown; null for an empty thread.
    active_leaf = models.ForeignKey(
        "chat.ChatMessage", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Optimistic concurrency for branch moves: a page that read revision r may move only from r.
    revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"chat of workflow {self.workflow_id} (rev {self.revision})"


class ChatMessage(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class Kind(models.TextChoices):
        MESSAGE = "message"  # the owner sent it
        EDIT = "edit"  # the owner edited an earlier message (meta.edit_of)
        ANSWER = "answer"  # the agent's reply
        RETRY = "retry"  # a reply from Try again

    class Status(models.TextChoices):
        COMPLETE = "complete"
        STOPPED = "stopped"
        ERROR = "error"

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    role = models.CharField(max_length=16, choices=Role.choices)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    text = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    generation = models.PositiveIntegerField()
    # NULL (not "") for "none given", so the partial unique constraint below ignores messages without one.
    client_message_id = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "client_message_id"],
                condition=Q(client_message_id__isnull=False),
                name="chat_message_client_id_once",
            )
        ]
        indexes = [models.Index(fields=["session", "parent"], name="chat_message_children_idx")]

    def __str__(self) -> str:
        return f"{self.role} message {self.pk}"


class ChatRun(models.Model):
    class Kind(models.TextChoices):
        MESSAGE = "message"
        EDIT = "edit"
        REGENERATE = "regenerate"

    class State(models.TextChoices):
        QUEUED = "queued"  # reserved: admitted but not yet handed to the runtime (never visible after commit today)
        PENDING = "pending"  # the firing is queued for a worker
        RUNNING = "running"  # the answering agent was prepared
        STOPPING = "stopping"  # the owner pressed Stop; the firing is winding down
        FINISHED = "finished"
        ERROR = "error"
        STOPPED = "stopped"

    ACTIVE_STATES = (State.QUEUED, State.PENDING, State.RUNNING, State.STOPPING)
    TERMINAL_STATES = (State.FINISHED, State.ERROR, State.STOPPED)

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    user_message = models.ForeignKey(ChatMessage, on_delete=models.CASCADE, related_name="runs")
    reply_message = models.OneToOneField(
        ChatMessage, null=True, blank=True, on_delete=models.SET_NULL, related_name="answered_by"
    )
    # The run that answered the message this run's message follows (the path it continued).
    parent_run = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    generation = models.PositiveIntegerField()
    agent_node_id = models.CharField(max_length=200)
    firing_id = models.UUIDField(null=True, blank=True, db_index=True)
    # {agent_node_id: {generation, length, digest}}: where each agent's conversation stood when this run first
    # prepared it (docs/architecture.md#branch-moves). Branch moves rewind to these.
    context_cursors = models.JSONField(default=dict, blank=True)
    # The last event seq sent for this run (the live counter is in Redis, see chat/run_stream.py).
    seq = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=32, blank=True, default="")  # answered | stopped | error
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # The lane (docs/chat.md#lane): at most one run that is not over per session. Admission checks it under the
            # session lock; this index is what makes a race lose instead of starting a second run.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(state__in=["queued", "pending", "running", "stopping"]),
                name="chat_run_one_active_per_session",
            )
        ]
        indexes = [models.Index(fields=["state", "updated_at"], name="chat_run_state_idx")]

    def __str__(self) -> str:
        return f"chat run {self.pk} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES


class ChatRunStep(models.Model):
    """A tool call of a run, shown under the answer as a step ("Worked for 3s · 2 steps"): the tool's name, its
    arguments and a short result (the full result is the ToolCallResult the runtime keeps). The owner's page and
    API read these; events carry the name only."""

    class State(models.TextChoices):
        STARTED = "started"
        FINISHED = "finished"

    run = models.ForeignKey(ChatRun, on_delete=models.CASCADE, related_name="steps")
    firing_id = models.UUIDField()
    agent_node_id = models.CharField(max_length=200)
    tool_call_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=State.choices, default=State.STARTED)
    is_error = models.BooleanField(default=False)
    arguments = models.JSONField(default=dict, blank=True)
    result = models.TextField(blank=True, default="")  # as the tool answered, capped (chat.observer.STEP_RESULT_CHARS)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "firing_id", "tool_call_id"], name="chat_run_step_once_per_call")
        ]

    def __str__(self) -> str:
        return f"{self.name} step of run {self.run_id}"


class ChatBranchSnapshot(models.Model):
    """An agent's stored conversation as it stood under a branch the owner moved away from (restored on switch)."""

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="snapshots")
    leaf_message = models.ForeignKey(ChatMessage, on_delete=models.CASCADE, related_name="+")
    agent_node_id = models.CharField(max_length=200)
    generation = models.PositiveIntegerField()
    messages = models.JSONField(default=list)
    size_bytes = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "leaf_message", "agent_node_id"], name="chat_branch_snapshot_once"
            )
        ]

    def __str__(self) -> str:
        return f"snapshot of {self.agent_node_id} under message {self.leaf_message_id}"


class ChatNote(models.Model):
    """What the owner did between turns, told to the answering agent as a bracketed line ahead of the next message."""

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="notes")
    key = models.CharField(max_length=200)
    text = models.TextField()
    claimed_by = models.ForeignKey(ChatRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="notes")
    told_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="chat_note_key_once")]

    def __str__(self) -> str:
        return f"note {self.key} ({'told' if self.told_at else 'untold'})"


class ChatMarker(models.Model):
    """A mark in the thread where the agent's context changed under the owner's eyes (a Clear context, or a
    compaction that summarized older turns): shown after the message that was the latest when it happened."""

    class Kind(models.TextChoices):
        CONTEXT_CLEARED = "context_cleared"
        COMPACTED = "compacted"

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="markers")
    after_message = models.ForeignKey(
        ChatMessage, null=True, blank=True, on_delete=models.CASCADE, related_name="markers_after"
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    # For `compacted`: a digest of the summary the agent was given, so one compaction is marked once.
    ref = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} after message {self.after_message_id}"


class ChatFeedback(models.Model):
    class Rating(models.TextChoices):
        GOOD = "good"
        BAD = "bad"

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="feedback")
    message = models.OneToOneField(ChatMessage, on_delete=models.CASCADE, related_name="feedback")
    rating = models.CharField(max_length=8, choices=Rating.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.rating} on message {self.message_id}"
