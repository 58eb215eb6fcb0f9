"""Recall query vectors embedded ahead of the transaction that uses them (memory/query_vectors.py)."""

from memory.query_vectors import prefetch_recall_query, prefetched_query_vector
from tests.memory.embedders import ConceptEmbedder


class CountingEmbedder(ConceptEmbedder):
    model = "test:counting"

    def __init__(self):
        self.texts = []

    def embed(self, texts):
        self.texts += texts
        return super().embed(texts)


def _with_vectors(monkeypatch, embedder, has_vectors=True):
    monkeypatch.setattr("memory.query_vectors.get_embedder", lambda: embedder)
    monkeypatch.setattr("memory.query_vectors.memory_node_has_vectors", lambda **kwargs: has_vectors)


def prefetch(arguments):
    prefetch_recall_query(arguments, workflow=None, node_id="1:simpleMemory:1")


def test_a_prefetched_query_vector_is_used_once(settings, monkeypatch):
    embedder = CountingEmbedder()
    _with_vectors(monkeypatch, embedder)
    prefetch({"operation": "recall", "query": "  morning tea  "})
    assert embedder.texts == ["morning tea"]  # cleaned as the recall cleans it
    assert prefetched_query_vector(embedder, "morning tea") == ConceptEmbedder().embed(["morning tea"])[0]
    assert embedder.texts == ["morning tea"]  # taken from the prefetch, not embedded again
    assert prefetched_query_vector(embedder, "morning tea") is None  # used once: the next recall embeds itself


def test_prefetch_ignores_what_is_not_a_valid_recall_and_never_raises(monkeypatch):
    embedder = CountingEmbedder()
    _with_vectors(monkeypatch, embedder)
    for arguments in (None, "recall", {"operation": "remember", "content": "x"}, {"operation": "recall"}):
        prefetch(arguments)
    assert embedder.texts == []

    def failing(texts):
        raise RuntimeError("embedder down")

    embedder.embed = failing
    prefetch({"operation": "recall", "query": "tea"})  # the recall itself will fall back to FTS


def test_no_query_is_embedded_ahead_for_a_memory_without_vectors(monkeypatch):
    embedder = CountingEmbedder()
    _with_vectors(monkeypatch, embedder, has_vectors=False)
    prefetch({"operation": "recall", "query": "tea"})  # that recall is full-text only
    assert embedder.texts == []
