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

from .embedders import Embedder, embedding_text, get_embedder
from .validation import clean_query

logger = logging.getLogger(__name__)

_TTL_SECONDS = 120.0
_MAX_ENTRIES = 256
_entries: OrderedDict[tuple[str, str], tuple[float, list[float]]] = OrderedDict()
_lock = threading.Lock()


def _text(query: str) -> str:
    return embedding_text(title="", content=query)


def prefetch_recall_query(arguments) -> None:
    """Embed the query of a `memory` recall call ahead of time. Never raises: the recall embeds on a miss."""
    if not isinstance(arguments, dict) or arguments.get("operation") != "recall":
        return
    try:
        embedder = get_embedder()
        if not embedder.enabled:
            return
        text = _text(clean_query(arguments.get("query")))
        vector = embedder.embed([text])[0]
    except Exception:  # a bad query or a failing embedder shows at the recall itself, which handles both
        return
    now = time.monotonic()
    with _lock:
        _entries[(embedder.model, text)] = (now + _TTL_SECONDS, vector)
        _entries.move_to_end((embedder.model, text))
        while len(_entries) > _MAX_ENTRIES:
            _entries.popitem(last=False)


def recall_query_vector(embedder: Embedder, query: str) -> list[float]:
    """The vector of a cleaned recall query: the prefetched one if there is one, else from the embedder."""
    text = _text(query)
    with _lock:
        entry = _entries.pop((embedder.model, text), None)
    if entry is not None and entry[0] > time.monotonic():
        return entry[1]
    return embedder.embed([text])[0]
