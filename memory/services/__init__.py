"""Writes to memory. Import from here, not from submodules.

Every mutation runs in one transaction that also stores its receipt and history row and registers the
`memory.updated` broadcast and the embedding task for after the commit.

Concurrency policy: an update or forget locks the item row (`memory.locks`) and compares `version` under the lock;
a remember takes the namespace row with a conditional increment of `item_count`, which both enforces the
per-namespace limit and serialises concurrent remembers with a clear. Retries carry an idempotency key: the receipt
table's unique (namespace, key) makes the second of two concurrent retries roll back and return the first result.
"""

from .announce import actor_label
from .embeddings import memory_embedding_store
from .expiry import memory_items_purge_expired
from .items import memory_item_forget, memory_item_remember, memory_item_update
from .namespaces import memory_namespace_clear, memory_namespace_get_or_create, memory_namespace_items_clear

__all__ = [
    "actor_label",
    "memory_embedding_store",
    "memory_item_forget",
    "memory_item_remember",
    "memory_item_update",
    "memory_items_purge_expired",
    "memory_namespace_clear",
    "memory_namespace_get_or_create",
    "memory_namespace_items_clear",
]
