"""Recall query embeddings computed before the transaction that needs them.

An agent's tool calls are answered under its firing's row lock, and the embedder may be a remote API; no such
call may run inside a lock. So once the model's answer is saved, the runtime embeds the recall queries in it
outside any transaction (`prefetch_recall_query`), and the recall that runs under the lock takes the vector from
here. Each entry is used once and lives a short while; a miss (the tools run in another process, the entry aged
out, the embedder failed ahead of time) embeds at the recall, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict

from .billing import embedding_call_record, query_call_key
from .embedders import Embedder, embedding_text, get_embedder
from .models import MemoryEmbedding
from .validation import clean_query

logger = logging.getLogger(__name__)

_TTL_SECONDS = 120.0
_MAX_ENTRIES = 256
_entries: OrderedDict[tuple[str, str], tuple[float, list[float]]] = OrderedDict()
_lock = threading.Lock()


def query_embedding_text(query: str) -> str:
    return embedding_text(title="", content=query)


def prefetch_recall_query(arguments, *, workflow, node_id: str) -> None:
    """Embed the query of a `memory` recall call in (workflow, node_id) ahead of time, when the recall will want it
    (the namespace has vectors). Never raises: the recall embeds on a miss."""
    if not isinstance(arguments, dict) or arguments.get("operation") != "recall":
        return
    try:
        embedder = get_embedder()
        if not embedder.enabled:
            return
        if not memory_node_has_vectors(workflow=workflow, node_id=node_id, model=embedder.model):
            return  # the recall will be full-text only and embed nothing
        text = query_embedding_text(clean_query(arguments.get("query")))
        vectors, input_tokens = embedder.embed_measured([text])
        vector = vectors[0]
    except Exception:  # a bad query or a failing embedder shows at the recall itself, which handles both
        return
    if embedder.billing_provider:
        embedding_call_record(
            embedder=embedder,
            input_tokens=input_tokens,
            idempotency_key=query_call_key(),
            owner_id=workflow.owner_id,
            workflow_id=workflow.pk,
            memory_node_id=node_id,
            purpose="recall",
            texts=1,
        )
    now = time.monotonic()
    with _lock:
        _entries[(embedder.model, text)] = (now + _TTL_SECONDS, vector)
        _entries.move_to_end((embedder.model, text))
        while len(_entries) > _MAX_ENTRIES:
            _entries.popitem(last=False)


def memory_node_has_vectors(*, workflow, node_id: str, model: str) -> bool:
    return MemoryEmbedding.objects.filter(
        namespace__owner_id=workflow.owner_id,
        namespace__workflow_id=workflow.pk,
        namespace__node_id=node_id,
        model=model,
        status=MemoryEmbedding.Status.READY,
    ).exists()


def prefetched_query_vector(embedder: Embedder, query: str) -> list[float] | None:
    """The vector embedded ahead for this cleaned recall query, taken (each is used once); None when there is none."""
    with _lock:
        entry = _entries.pop((embedder.model, query_embedding_text(query)), None)
    return entry[1] if entry is not None and entry[0] > time.monotonic() else None
