"""Per-model HNSW indexes over the dimensionless `embedding` column.

pgvector indexes need a fixed dimension, so each model gets a partial expression index
`((embedding::vector(N))) WHERE model = '<model>'`, and the vector query casts the same way so the planner can use
it. Above 2,000 dimensions (HNSW's limit for `vector`) the index and the query use `halfvec(N)`.

Each model also gets a second, small index over its *outliers* only (`... AND outlier`, memory/outliers.py): the
vectors with no near neighbour, which the main graph links poorly (see docs/memory.md, "where the paraphrases
were lost").
"""

from __future__ import annotations

import hashlib
import re

from django.db import connection

HNSW_MAX_VECTOR_DIMS = 2000
_SAFE_MODEL = re.compile(r"^[A-Za-z0-9:._@/-]{1,120}$")
_ensured: set[tuple[str, int]] = set()


def vector_cast(dims: int) -> str:
    if dims <= 0 or dims > 4000:
        raise ValueError(f"unsupported embedding dimension {dims}")
    return f"vector({int(dims)})" if dims <= HNSW_MAX_VECTOR_DIMS else f"halfvec({int(dims)})"


def _ops(dims: int) -> str:
    return "vector_cosine_ops" if dims <= HNSW_MAX_VECTOR_DIMS else "halfvec_cosine_ops"


def index_name(model: str, dims: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:30]
    digest = hashlib.sha1(f"{model}/{dims}".encode()).hexdigest()[:8]
    return f"memory_emb_hnsw_{slug}_{digest}"


def outlier_index_name(model: str, dims: int) -> str:
    return index_name(model, dims).replace("memory_emb_hnsw_", "memory_emb_out_", 1)


def vector_index_sql(model: str, dims: int, *, concurrently: bool, outliers: bool = False) -> str:
    if not _SAFE_MODEL.match(model):
        raise ValueError(f"unsafe model name for an index predicate: {model!r}")
    name = outlier_index_name(model, dims) if outliers else index_name(model, dims)
    return (
        f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS {name} "
        f"ON memory_memoryembedding USING hnsw ((embedding::{vector_cast(dims)}) {_ops(dims)}) "
        f"WHERE model = '{model}'{' AND outlier' if outliers else ''}"
    )


def ensure_vector_index(model: str, dims: int) -> None:
    """Create the model's index if missing, concurrently so writes go on. Inside a transaction this does nothing:
    the index is an accelerator, and the exact scan answers the same query until the next call outside one."""
    if (model, dims) in _ensured or not connection.get_autocommit():
        return
    with connection.cursor() as cursor:
        cursor.execute(vector_index_sql(model, dims, concurrently=True))
        cursor.execute(vector_index_sql(model, dims, concurrently=True, outliers=True))
    _ensured.add((model, dims))
