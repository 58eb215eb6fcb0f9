"""Tables of the conversation store, the firing lease and the usage ledger.

A conversation is a header row (`AgentConversation`, the thing that is locked) plus one row per message
(`ConversationMessage`). Storing messages as rows lets a save write only what changed since the stored prefix:
appending a turn inserts the turn's rows and updates the header, whatever the length of the conversation.
"""

from django.conf import settings
from django.db import models

from workflows.models import Workflow

# blake2b-128 of b"": the digest of an empty conversation (see store.transcript.chain_hash).
EMPTY_DIGEST = "cae66941d9efbd404e4d88758ea67670"


class ExactJSONField(models.JSONField):
    """A PostgreSQL `json` (not `jsonb`) column: the stored text is exactly what was written, key order and number
    spelling included, so a message reads back byte-identical to the one saved (jsonb would reorder keys)."""

    def db_type(self, connection):
        return "json"

    def from_db_value(self, value, expression, connection):
        # psycopg parses `json` itself (Django only registers a text loader for jsonb).
        if value is None or not isinstance(value, str | bytes):
            return value
        return super().from_db_value(value, expression, connection)


class AgentConversation(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="conversations")
    generation = models.PositiveIntegerField()
    agent_node_id = models.CharField(max_length=200)
    message_count = models.PositiveIntegerField(default=0)
    size_bytes = models.PositiveBigIntegerField(default=0)
    # Bumped on every write of the messages; compaction's compare-and-swap and the per-process copy check it.
    version = models.PositiveBigIntegerField(default=0)
    # Chained over the messages without `ts` (store.transcript.chain_hash); equals conversation_cursor()["digest"].
    digest = models.CharField(max_length=64, default=EMPTY_DIGEST)
    # Active context pressure, measured by the provider layer after each step; for display only.
    pressure_input_tokens = models.PositiveIntegerField(null=True, blank=True)
    pressure_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    context_window_tokens = models.PositiveIntegerField(null=True, blank=True)
    pressure_measured_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "generation", "agent_node_id"], name="agent_conversation_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id}/{self.generation}/{self.agent_node_id} ({self.message_count} messages)"


class ConversationCompaction(models.Model):
    """The one compaction slot of a conversation key (docs/invariants.md#compaction).

    At most one summary is in flight per conversation: a turn over the threshold claims the slot (`running`), later
    turns find it taken and queue nothing. A summary that could not land at once because a firing holds the key's
    lease waits here (`ready`, with the prefix it summarises) for that firing to land it. The counters are what the
    Context panel shows; the ledger (`UsageRecord`) keeps the calls themselves.
    """

    class State(models.TextChoices):
        IDLE = "idle"
        RUNNING = "running"
        READY = "ready"

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="+")
    generation = models.PositiveIntegerField()
    agent_node_id = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=State.choices, default=State.IDLE)
    started_at = models.DateTimeField(null=True, blank=True)
    # Touched by the running summary's heartbeat: a slot silent for AGENT_STEP_LOST_AFTER_SECONDS was lost with its
    # worker and may be claimed again.
    beat_at = models.DateTimeField(null=True, blank=True)
    # A firing that waits for this compaction before its next step (agents: Firing.compaction_pending); a plain id,
    # the store imports no runtime.
    waiting_firing_id = models.UUIDField(null=True, blank=True)
    waiting_iteration = models.PositiveIntegerField(default=0)
    # The summarised prefix's identity at the snapshot: the header row, how many messages, the chain digest at its
    # last message. "Unchanged" at landing means all three still hold.
    prefix_conversation_id = models.BigIntegerField(null=True, blank=True)
    prefix_length = models.PositiveIntegerField(default=0)
    prefix_chain = models.CharField(max_length=64, blank=True, default="")
    summary = models.TextField(blank=True, default="")
    summaries = models.PositiveIntegerField(default=0)  # summary calls paid for
    landed = models.PositiveIntegerField(default=0)
    discarded = models.PositiveIntegerField(default=0)
    last_landed_at = models.DateTimeField(null=True, blank=True)
    last_outcome = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "generation", "agent_node_id"], name="conversation_compaction_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"compaction {self.workflow_id}/{self.generation}/{self.agent_node_id} ({self.state})"


class ConversationMessage(models.Model):
    conversation = models.ForeignKey(AgentConversation, on_delete=models.CASCADE, related_name="message_rows")
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16)
    data = ExactJSONField()
    # blake2b-128 of the message's canonical JSON without `ts`: the prefix check compares these, not the JSON.
    hash = models.BinaryField(max_length=16)
    # The digest of the prefix ending at this message: a chat cursor check reads this one row.
    chain = models.BinaryField(max_length=16)
    size_bytes = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "position"], name="conversation_message_unique_position")
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}#{self.position} {self.role}"


class FiringLease(models.Model):
    """Serializes firings of one conversation key (docs/invariants.md#one-firing-per-conversation). Expires so a
    dead worker frees it."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="firing_leases")
    generation = models.PositiveIntegerField()
    agent_node_id = models.CharField(max_length=200)
    owner_token = models.CharField(max_length=100)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow", "generation", "agent_node_id"], name="firing_lease_unique_key")
        ]

    def __str__(self) -> str:
        return f"lease {self.workflow_id}/{self.generation}/{self.agent_node_id} by {self.owner_token}"


class RetainedConversation(models.Model):
    """A stored list that was rewritten (cleared, rewound, compacted) while a firing held its key's lease.

    A firing builds each request from the stored list it extends plus its own unsaved messages, keeping no copy of
    the conversation; when someone else rewrites that list mid-turn, the firing still sends what it was sending
    (the store observes, it never steers). Kept until the lease is released; leftovers are pruned.
    """

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="+")
    generation = models.PositiveIntegerField()
    agent_node_id = models.CharField(max_length=200)
    version = models.PositiveBigIntegerField()
    digest = models.CharField(max_length=64)
    message_count = models.PositiveIntegerField()
    messages = ExactJSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["workflow", "generation", "agent_node_id", "version"])]

    def __str__(self) -> str:
        return f"retained {self.workflow_id}/{self.generation}/{self.agent_node_id} v{self.version}"


class OwnerConversationSettings(models.Model):
    """An owner's own limits for their agents' conversations, at most the site's (never above them)."""

    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Tool results longer than this are cut before they enter a conversation (docs/invariants.md#tool-result-cap);
    # null: the site's TOOL_RESULT_MAX_CHARS.
    tool_result_max_chars = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"conversation settings of {self.owner_id}"


class UsageRecordQuerySet(models.QuerySet):
    # The ledger is append-only: code has no path to change or remove a row (a database trigger backs this up).
    def update(self, **kwargs):
        raise TypeError("UsageRecord is append-only")

    def delete(self):
        raise TypeError("UsageRecord is append-only")


class UsageRecord(models.Model):
    """One row per provider call (LLM step, compaction, embedding): lifetime usage, never conflated with pressure.

    `workflow_id` and `owner_id` are plain columns, not foreign keys, so billing history outlives the workflow.
    """

    class Kind(models.TextChoices):
        LLM = "llm"
        COMPACTION = "compaction"
        EMBEDDING = "embedding"

    class Outcome(models.TextChoices):
        OK = "ok"
        ERROR = "error"
        AMBIGUOUS = "ambiguous"
        # A compaction summary paid for (its own row, outcome ok) and then not used: the turns it summarised
        # changed before it could land (docs/invariants.md#compaction). A row of its own, no tokens.
        DISCARDED = "discarded"

    idempotency_key = models.CharField(max_length=200, unique=True)
    owner_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    workflow_id = models.BigIntegerField(null=True, blank=True)
    generation = models.PositiveIntegerField(null=True, blank=True)
    agent_node_id = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    provider = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    input_tokens = models.PositiveBigIntegerField(default=0)
    cached_input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = UsageRecordQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["workflow_id", "generation", "agent_node_id"], name="usage_by_conversation")]

    def __str__(self) -> str:
        return f"{self.kind} {self.provider}/{self.model} {self.outcome}"

    def delete(self, *args, **kwargs):
        raise TypeError("UsageRecord is append-only")


class RuntimeSessionBinding(models.Model):
    """Which Claude Code session continues an agent's conversation, and where that session's transcript lives.

    The transcript file is the runtime's hidden state (it is on one worker's disk); the binding is used only while
    the stored conversation is exactly what the session last saw (`cursor_length` / `cursor_digest`, the stored
    list's cursor after the turn that recorded it). Anything else (Clear Context, Reset, a branch move, a
    compaction, a save that failed) makes the next firing start a new session from a portable transcript of the
    stored conversation, which is the record of truth (providers/README.md, "Agent runtimes").
    """

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="+")
    generation = models.PositiveIntegerField()
    agent_node_id = models.CharField(max_length=200)
    runtime = models.CharField(max_length=32)
    session_id = models.CharField(max_length=100)
    transcript_path = models.TextField()
    cursor_length = models.PositiveIntegerField()
    cursor_digest = models.CharField(max_length=64)
    # The session's cumulative cost as the runtime last reported it: the next firing bills only the difference.
    session_cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "generation", "agent_node_id"], name="runtime_session_binding_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.runtime} session {self.session_id} for {self.workflow_id}/{self.generation}/{self.agent_node_id}"


class RuntimeInteractionPoint(models.Model):
    """A point of an agent's stored conversation a Vertex interaction continues from (provider "vertex_agent").

    One row per stored cursor (length and chained digest of the stored list right after the turn that produced the
    interaction): the last interaction id (what `previous_interaction_id` continues) and the environment id (the
    sandbox it ran in). The next firing looks up the row for the cursor it extends: after a normal turn that is the
    latest one; after a branch move that rewound the list to an earlier point, that point's row when there is one.
    No row (Clear Context deletes them all, a Reset starts a new generation, a compaction or a save that failed
    moves the digest): a new interaction starts from a portable transcript. Google keeps the interaction state;
    this keeps only which interaction matches which stored point (providers/README.md, "Agent runtimes").
    """

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="+")
    generation = models.PositiveIntegerField()
    agent_node_id = models.CharField(max_length=200)
    runtime = models.CharField(max_length=32)
    # project/location/agent the interaction belongs to: another agent (the owner changed the params) never
    # continues it.
    agent_ref = models.CharField(max_length=500, default="")
    cursor_length = models.PositiveIntegerField()
    cursor_digest = models.CharField(max_length=64)
    interaction_id = models.CharField(max_length=200)
    environment_id = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "generation", "agent_node_id", "cursor_length", "cursor_digest"],
                name="runtime_interaction_point_unique_cursor",
            )
        ]

    def __str__(self) -> str:
        return f"{self.runtime} interaction {self.interaction_id} at {self.cursor_length} for {self.agent_node_id}"
