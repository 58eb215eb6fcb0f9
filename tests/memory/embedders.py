"""Deterministic embedders for tests: a tiny concept space (so paraphrases land close) and a failing one."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from memory.embedders import Embedder, EmbedderError
from memory.models import MemoryEmbedding, MemoryItem, MemoryNamespace

CONCEPTS = [
    {"tea", "coffee", "espresso", "latte", "beverage", "beverages", "drink", "drinks", "cup", "brew"},
    {"morning", "breakfast", "dawn", "sunrise", "early"},
    {"flight", "flights", "plane", "airport", "trip", "travel", "fly", "flying", "airline"},
    {"invoice", "invoices", "payment", "billing", "budget", "price", "pay", "paid", "cost"},
    {"dog", "dogs", "cat", "cats", "pet", "pets", "puppy", "animal"},
    {"meeting", "meetings", "standup", "call", "calendar", "schedule"},
    {"printer", "toner", "paper", "print"},
    {"favorite", "favourite", "prefer", "prefers", "preferred", "like", "likes", "love", "loves", "enjoys"},
]
DIMS = 16
_WORD = re.compile(r"[a-z]+")


def concept_vector(text: str) -> list[float]:
    vector = [0.0] * DIMS
    for word in _WORD.findall(text.lower()):
        hits = [i for i, words in enumerate(CONCEPTS) if word in words]
        for i in hits:
            vector[i] += 1.0
        if not hits:
            vector[len(CONCEPTS) + (sum(map(ord, word)) % (DIMS - len(CONCEPTS)))] += 0.15
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class ConceptEmbedder(Embedder):
    name = "test-concepts"
    model = "test:concepts"
    dims = DIMS
    calls = 0

    def embed(self, texts):
        type(self).calls += 1
        return [concept_vector(text) for text in texts]


class FlakyConceptEmbedder(ConceptEmbedder):
    """The same vector space as ConceptEmbedder; raises while `fail` is set."""

    fail = True

    def embed(self, texts):
        if type(self).fail:
            raise EmbedderError("embedder forced to fail by the test")
        return super().embed(texts)


class RaisingEmbedder(Embedder):
    name = "test-raising"
    model = "test:raising"
    dims = DIMS

    def embed(self, texts):
        raise RuntimeError("boom")


class InterruptedConceptEmbedder(ConceptEmbedder):
    """The same vector space as ConceptEmbedder; counts the texts it embeds and stops the process (as Ctrl-C does)
    on call number `interrupt_on` (None: never)."""

    interrupt_on: int | None = None
    texts: list[str] = []

    def embed(self, texts):
        cls = type(self)
        cls.calls += 1
        if cls.interrupt_on is not None and cls.calls == cls.interrupt_on:
            raise KeyboardInterrupt
        cls.texts = [*cls.texts, *texts]
        return [concept_vector(text) for text in texts]


RANDOM_DIMS = 64


def random_vector(text: str) -> list[float]:
    """A fixed pseudo-random unit vector per text: no semantics, so only the vector index decides what is near."""
    import hashlib
    import random

    rng = random.Random(hashlib.sha256(text.encode()).digest())
    vector = [rng.gauss(0.0, 1.0) for _ in range(RANDOM_DIMS)]
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class RandomEmbedder(Embedder):
    """`random_vector` of each text, except the texts a test pins to a vector of its own (`fixed`)."""

    name = "test-random"
    model = "test:random-64"
    dims = RANDOM_DIMS
    fixed: dict[str, list[float]] = {}

    def embed(self, texts):
        return [self.fixed.get(text) or random_vector(text) for text in texts]


def unit(vector):
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def axis(n, scale=1.0):
    return [scale if i == n else 0.0 for i in range(RANDOM_DIMS)]


def plus(*vectors):
    return [sum(values) for values in zip(*vectors, strict=True)]


def noise(rng, scale):
    return [rng.gauss(0.0, scale / math.sqrt(RANDOM_DIMS)) for _ in range(RANDOM_DIMS)]


def distance(a, b):
    """Cosine distance, as pgvector's `<=>`."""
    return 1.0 - sum(x * y for x, y in zip(unit(a), unit(b), strict=True))


def store_random_vectors(rows):
    """rows: (namespace, vector) -> the items made, each with a ready projection of RandomEmbedder's model holding
    its vector (bulk-inserted: no embedding task runs), and each namespace's item count brought up to date."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    items = MemoryItem.objects.bulk_create(
        MemoryItem(namespace=namespace, content=f"note {n}", version=1, created_at=now, updated_at=now)
        for n, (namespace, _) in enumerate(rows)
    )
    MemoryEmbedding.objects.bulk_create(
        MemoryEmbedding(
            item=item,
            namespace_id=item.namespace_id,
            model=RandomEmbedder.model,
            dims=RandomEmbedder.dims,
            embedding=vector,
            item_version=1,
            status=MemoryEmbedding.Status.READY,
        )
        for item, (_, vector) in zip(items, rows, strict=True)
    )
    for namespace in {namespace for namespace, _ in rows}:
        MemoryNamespace.objects.filter(pk=namespace.pk).update(item_count=namespace.items.count())
    return items
