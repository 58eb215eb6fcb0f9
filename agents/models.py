"""A firing is one activation of one agent; its LLM steps and tool results are recorded here.

The working message list lives in the database (not in task payloads): tasks carry the
firing id and the step number only.
"""

import uuid

from django.db import models


class Firing(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"  # a teammate it delegated to is still working
        FINISHED = "finished"
        FAILED = "failed"
        STOPPED = "stopped"

    TERMINAL_STATES = (State.FINISHED, State.FAILED, State.STOPPED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow = models.ForeignKey("workflows.Workflow", on_delete=models.CASCADE, related_name="firings")
    generation = models.PositiveIntegerField()
    agent_node_id = models.CharField(max_length=200)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    parent_tool_call_id = models.CharField(max_length=200, blank=True, default="")
    depth = models.PositiveSmallIntegerField(default=0)
    # Agent node ids from the top firing down to this one: delegation refuses a cycle through it.
    delegation_chain = models.JSONField(default=list)
    chat_run_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    # The schedule or webhook trigger whose message this firing answers (docs/triggers.md): its node id and the
    # name the run history shows ("Scheduled: morning summary"), as they were when it fired. Empty: the owner's own
    # message, a test run or a delegation.
    trigger_node_id = models.CharField(max_length=200, blank=True, default="")
    trigger_label = models.CharField(max_length=300, blank=True, default="")
    prompt = models.TextField()

    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    stop_requested = models.BooleanField(default=False)
    iteration = models.PositiveIntegerField(default=0)
    # A compaction between steps is due or running: it, not a step, continues the firing (execute refuses until
    # it has), so the watchdog's "next step never started" rule leaves the firing alone.
    compaction_pending = models.BooleanField(default=False)
    uses_conversation = models.BooleanField(default=False)
    lease_token = models.CharField(max_length=64, blank=True, default="")
    # Resolved at prepare time from the generation's graph snapshot.
    agent_config = models.JSONField(default=dict)
    tool_bindings = models.JSONField(default=list)
    # A firing keeps no copy of its conversation. The next request is the stored list it extends plus the messages
    # it added and has not saved yet (`agents.services.messages.firing_messages`); see docs/architecture.md.
    # `stored_prefix`: {length, version, digest, size_bytes} of that stored list; or {"replaces": version} when the
    # first save must rewrite the stored list (a changed system prompt, a repair in the middle) and
    # `pending_messages` is the whole list; or null (no Context: `pending_messages` is the whole list). A
    # "detached": true in it means the stored list moved on under the firing (cleared, rewound): it stops saving.
    stored_prefix = models.JSONField(null=True, blank=True)
    pending_messages = models.JSONField(default=list)
    # The last step whose tool results are in the firing's list (a re-entered persist continues after it).
    results_iteration = models.PositiveIntegerField(default=0)

    tokens_used = models.PositiveIntegerField(default=0)
    final_text = models.TextField(blank=True, default="")
    end_reason = models.CharField(max_length=64, blank=True, default="")
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.TextField(blank=True, default="")

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["state", "updated_at"]),
            models.Index(fields=["workflow", "generation", "agent_node_id"]),
            # The run history filtered by a trigger: only the firings a trigger started are in it.
            models.Index(
                fields=["workflow", "trigger_node_id", "created_at"],
                condition=~models.Q(trigger_node_id=""),
                name="agents_firing_by_trigger",
            ),
        ]

    def __str__(self) -> str:
        return f"firing {self.id} {self.agent_node_id} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return self.state in self.TERMINAL_STATES


class LlmStep(models.Model):
    """One provider call. Recorded as started before the call, so a lost worker leaves evidence."""

    class State(models.TextChoices):
        STARTED = "started"
        COMPLETED = "completed"  # the provider answered; persist_turn has not saved it yet
        PERSISTED = "persisted"
        FAILED = "failed"
        AMBIGUOUS = "ambiguous"  # the worker was lost mid-call: it may or may not have been billed

    firing = models.ForeignKey(Firing, on_delete=models.CASCADE, related_name="steps")
    iteration = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.STARTED)
    worker = models.CharField(max_length=200, blank=True, default="")
    # The assistant MessageWire, usage and stop reason, kept here so they never ride the broker.
    result = models.JSONField(null=True, blank=True)
    # What the request was made of, in counts and names (never the messages): how many messages, how many of them
    # the stored conversation, whether a compaction summary led it, the tools offered (agents/selectors.py).
    request_info = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True, default="")
    started_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["firing", "iteration"], name="llm_step_once_per_iteration")]
        indexes = [models.Index(fields=["state", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"step {self.iteration} of {self.firing_id} ({self.state})"


class ToolCallResult(models.Model):
    """A tool call's answer, recorded once so a retried persist never runs a tool twice.

    A remote call (an MCP server's tool) is recorded `started` before it is made, with the time by which its worker
    answers or is taken for lost (`deadline_at`); a `started` row past it becomes `ambiguous`: it may have reached
    the server, so it is never sent again (docs/tools.md#never-re-sent)."""

    class State(models.TextChoices):
        STARTED = "started"
        COMPLETED = "completed"
        AMBIGUOUS = "ambiguous"

    firing = models.ForeignKey(Firing, on_delete=models.CASCADE, related_name="tool_results")
    iteration = models.PositiveIntegerField()
    tool_call_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    content = models.TextField(default="")
    is_error = models.BooleanField(default=False)
    state = models.CharField(max_length=16, choices=State.choices, default=State.COMPLETED)
    node_id = models.CharField(max_length=200, blank=True, default="")
    deadline_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    child_firing = models.ForeignKey(Firing, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["firing", "tool_call_id"], name="tool_result_once_per_call"),
        ]

    def __str__(self) -> str:
        return f"{self.name} result for {self.tool_call_id}"
