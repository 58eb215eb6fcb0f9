"""Which stored vectors are outliers: no other vector of their model within MEMORY_VECTOR_OUTLIER_DISTANCE.

Why it matters: an HNSW graph links a vector from its neighbours only while it is among their nearest. A vector
unlike everything near it (a memory about the Wi-Fi among ten thousand about invoices) gets few links in, and
fewer as the dense regions around it fill in; a query that lands near it but off the corpus walks into those
regions and never reaches it, however wide the walk. Recall therefore also walks a small second index that holds
the outliers only (memory/selectors.py), where such a vector has near neighbours of its own kind.

The mark is made when a vector is stored, against the vectors stored before it, and kept: a later near neighbour
links to it in the main graph (it is then among that neighbour's nearest), so it does not need unmarking. The
probe is one walk of the main index, which can only overestimate the nearest distance: it errs towards marking.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction

from .embedders.indexes import vector_cast
from .models import MemoryEmbedding

# One statement: the walk's width is set inside it (transaction-local, as recall does; see memory/selectors.py).
_MARK_SQL = """
UPDATE memory_memoryembedding e SET outlier = (probe.distance IS NULL OR probe.distance > %(threshold)s)
FROM memory_memoryembedding self
LEFT JOIN LATERAL (
    SELECT o.embedding::{cast} <=> self.embedding::{cast} AS distance
    FROM memory_memoryembedding o
    WHERE set_config('hnsw.ef_search', %(ef_search)s, true) IS NOT NULL
      AND o.model = %(model)s AND o.id <> self.id
    ORDER BY o.embedding::{cast} <=> self.embedding::{cast}
    LIMIT 1
) probe ON TRUE
WHERE e.id = self.id AND self.model = %(model)s AND self.status = %(ready)s AND self.item_id = ANY(%(item_ids)s)
  -- Only a change is written: the outlier index's predicate names the column, so every written row is a new tuple
  -- in every index of the table, the main HNSW graph included (an insert there is a walk of its own).
  AND e.outlier IS DISTINCT FROM (probe.distance IS NULL OR probe.distance > %(threshold)s)
"""


def memory_embeddings_outliers_mark(*, item_ids: list[int], model: str, dims: int) -> int:
    """Mark or unmark the ready vectors of these items for `model`. Returns how many changed.

    Runs in its own short statement, outside any lock (the embedding task calls it after storing the vectors)."""
    if not item_ids:
        return 0
    # A savepoint when called under a transaction, so a failed mark cannot abort the caller's.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _MARK_SQL.format(cast=vector_cast(dims)),
            {
                "threshold": settings.MEMORY_VECTOR_OUTLIER_DISTANCE,
                "ef_search": str(settings.MEMORY_VECTOR_OUTLIER_EF_SEARCH),
                "model": model,
                "ready": MemoryEmbedding.Status.READY,
                "item_ids": list(item_ids),
            },
        )
        return cursor.rowcount
