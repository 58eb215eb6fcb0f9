"""Embedding calls in the usage ledger (kind "embedding"): one row per provider-billed call, written once.

An embedder that runs here (the default MiniLM, the torch one, a test embedder) costs nothing and writes no row: a
zero row on every memory write would only grow the ledger. A provider embedder (`billing_provider` set) writes one
row per call it made, with the tokens the provider reported and the cost from the maintained price data, attributed
to the owner and workflow of the memory node (the node is in `meta`, not in `agent_node_id`: it is not an agent).
"""

from __future__ import annotations

import hashlib
import logging
import uuid

from django.db import transaction

from .embedders import Embedder

logger = logging.getLogger(__name__)


def item_batch_key(*, model: str, items, attempt: str = "") -> str:
    """The idempotency key of embedding these item versions: a retried task computes the same one, so a call it
    repeats is never billed twice. `attempt` separates a deliberate re-embedding (`memory_reindex --all`)."""
    pairs = ",".join(f"{item.pk}@{item.version}" for item in sorted(items, key=lambda item: item.pk))
    digest = hashlib.sha256(f"{model}|{pairs}|{attempt}".encode()).hexdigest()[:40]
    return f"embedding:items:{digest}"


def embedding_call_record(
    *,
    embedder: Embedder,
    input_tokens: int,
    idempotency_key: str,
    owner_id: int | None,
    workflow_id: int | None,
    memory_node_id: str,
    purpose: str,
    texts: int,
) -> bool:
    """Append the ledger row of one embedding call. Returns False when nothing was written (a local embedder, or
    the key is already recorded). Never raises: billing a call that already happened must not lose its vectors."""
    if not embedder.billing_provider:
        return False
    from conversations.services import UsageEntry, usage_record_append
    from providers.billing import embedding_ledger_fields

    model = embedder.billing_model or embedder.model
    try:
        fields = embedding_ledger_fields(provider=embedder.billing_provider, model=model, input_tokens=input_tokens)
        fields["meta"] = {**fields["meta"], "purpose": purpose, "memory_node_id": memory_node_id, "texts": texts}
        # A savepoint: a recall bills its query embedding inside its transaction, which a failed insert must not
        # break.
        with transaction.atomic():
            return usage_record_append(
                entry=UsageEntry(
                    idempotency_key=idempotency_key,
                    kind="embedding",
                    provider=embedder.billing_provider,
                    model=model,
                    outcome="ok",
                    owner_id=owner_id,
                    workflow_id=workflow_id,
                    **fields,
                )
            )
    except Exception:
        logger.exception("could not record an embedding call in the usage ledger")
        return False


def query_call_key() -> str:
    """A recall query's embedding is its own call each time (a retried step asks the provider again, and pays), so
    each gets a fresh key; the key only guards the insert itself."""
    return f"embedding:query:{uuid.uuid4().hex}"
