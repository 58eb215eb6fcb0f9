from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import VectorField

from workflows.models import Workflow

# The generated tsvector column is fixed in the schema; changing the text search configuration is a migration.
FTS_CONFIG = "english"


class MemoryNamespace(models.Model):
    """(owner, workflow, memory node): the only scope a memory item lives in. Derived by the backend, never sent."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="memory_namespaces")
    node_id = models.CharField(max_length=200)
    # Kept in step with the items by the services under this row's lock, so the per-namespace limit holds under
    # concurrency without a COUNT(*) on every write. Expired items count until the purge removes them.
    item_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "workflow", "node_id"], name="memory_namespace_unique_scope")
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id}/{self.node_id}"


class MemoryItem(models.Model):
    namespace = models.ForeignKey(MemoryNamespace, on_delete=models.CASCADE, related_name="items")
    content = models.TextField()
    title = models.CharField(max_length=200, blank=True, default="")
    category = models.CharField(max_length=50, blank=True, default="")
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    version = models.PositiveIntegerField(default=1)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Set by the services from memory.clock so a frozen clock in tests governs them too.
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    search_vector = models.GeneratedField(
        expression=SearchVector("title", weight="A", config=FTS_CONFIG)
        + SearchVector("content", weight="B", config=FTS_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    # The lexemes that make a text match rank above "once, in the content": the title's, and the content's that
    # occur at least twice (SQL function memory_salient_tsvector, migration 0005). A broad query ranks older
    # matches only through this small index (memory/selectors.py).
    search_salient = models.GeneratedField(
        expression=models.Func(
            models.F("title"), models.F("content"), function="memory_salient_tsvector", output_field=SearchVectorField()
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        indexes = [
            GinIndex(fields=["search_vector"], name="memory_item_fts"),
            GinIndex(fields=["search_salient"], name="memory_item_salient"),
            models.Index(fields=["namespace", "-id"], name="memory_item_ns_id"),
            models.Index(fields=["namespace", "category"], name="memory_item_ns_category"),
            GinIndex(fields=["tags"], name="memory_item_tags"),
            models.Index(
                fields=["expires_at"], name="memory_item_expires", condition=models.Q(expires_at__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.content[:60]


class MemoryEmbedding(models.Model):
    """A rebuildable projection of one item for one embedding model; full-text search never depends on it.

    `embedding` has no fixed dimension: each model gets its own partial expression HNSW index
    (`(embedding::vector(N)) ... WHERE model = '...'`, see memory/embedders/indexes.py) and queries use the same cast.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        READY = "ready"
        FAILED = "failed"

    item = models.ForeignKey(MemoryItem, on_delete=models.CASCADE, related_name="embeddings")
    # The item's namespace, copied here (items never move) so "does this namespace have vectors?" and the vector
    # search's namespace condition read this table alone instead of joining every projection to its item.
    namespace = models.ForeignKey(MemoryNamespace, on_delete=models.CASCADE, related_name="+", db_index=False)
    model = models.CharField(max_length=120)
    dims = models.PositiveIntegerField(null=True, blank=True)
    embedding = VectorField(null=True, blank=True)
    # The item version the vector was computed from; a vector of an older version is not used.
    item_version = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = models.CharField(max_length=500, blank=True, default="")
    # No other vector of the model lay within MEMORY_VECTOR_OUTLIER_DISTANCE when this one was stored
    # (memory/outliers.py). Outliers are also in a small HNSW index of their own, which recall walks beside the
    # main one: the main graph keeps few links into a vector unlike its neighbours.
    outlier = models.BooleanField(default=False, db_default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "model"], name="memory_embedding_unique_model")]
        indexes = [
            models.Index(fields=["model", "status"], name="memory_embedding_model_status"),
            models.Index(fields=["namespace", "model", "status"], name="memory_embedding_ns_model"),
        ]

    def __str__(self) -> str:
        return f"{self.item_id} {self.model} ({self.status})"


class MemoryItemHistory(models.Model):
    class Operation(models.TextChoices):
        REMEMBER = "remember"
        UPDATE = "update"
        FORGET = "forget"
        CLEAR = "clear"

    namespace = models.ForeignKey(MemoryNamespace, on_delete=models.CASCADE, related_name="history")
    # No database constraint: the forget row outlives its item (and a forget removes the item's earlier rows, so
    # forgotten content does not linger here).
    item = models.ForeignKey(
        MemoryItem, on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="history"
    )
    operation = models.CharField(max_length=16, choices=Operation.choices)
    version = models.PositiveIntegerField(null=True, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # "agent:<node id>", "owner:<user id>", "staff:<user id>", "system:<what>"
    actor = models.CharField(max_length=200)
    # Provenance (memory/provenance.py): where the write came from, and for an agent's, the turn that made it.
    source = models.CharField(max_length=16, default="system")
    firing_id = models.UUIDField(null=True, blank=True, db_index=True)
    chat_run_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    agent_node_id = models.CharField(max_length=200, blank=True, default="")
    generation = models.PositiveIntegerField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["item", "-id"], name="memory_history_item")]
        verbose_name_plural = "memory item history"

    def __str__(self) -> str:
        return f"{self.operation} {self.item_id} v{self.version} by {self.actor}"


class MemoryReceipt(models.Model):
    """Idempotency key -> the stored result of the first mutation, so a retried tool call changes nothing again."""

    namespace = models.ForeignKey(MemoryNamespace, on_delete=models.CASCADE, related_name="receipts")
    key = models.CharField(max_length=255)
    operation = models.CharField(max_length=16)
    request_digest = models.CharField(max_length=64)
    result = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "key"], name="memory_receipt_unique_key")]
        indexes = [models.Index(fields=["created_at"], name="memory_receipt_created")]

    def __str__(self) -> str:
        return f"{self.operation} {self.key}"
