"""Billing a provider call to the ledger, once, whatever retries happen."""

from __future__ import annotations

from decimal import Decimal

from conversations.services import UsageEntry, usage_record_append, usage_record_statements
from providers.billing import ledger_fields


def record_llm_usage(firing, *, idempotency_key: str, kind: str, outcome: str, usage: dict | None = None) -> bool:
    """Bill now (one statement); False when the key was billed already."""
    return usage_record_append(
        entry=llm_usage_entry(firing, idempotency_key=idempotency_key, kind=kind, outcome=outcome, usage=usage)
    )


def llm_usage_statements(
    firing, *, idempotency_key: str, kind: str, outcome: str, usage: dict | None = None
) -> list[tuple[str, str, list]]:
    """The same bill as named statements, to send along with the firing's next write (`firing_write_along`)."""
    return usage_record_statements(
        entry=llm_usage_entry(firing, idempotency_key=idempotency_key, kind=kind, outcome=outcome, usage=usage)
    )


def llm_usage_entry(firing, *, idempotency_key: str, kind: str, outcome: str, usage: dict | None = None) -> UsageEntry:
    config = firing.agent_config or {}
    provider, model = config.get("provider", "unknown"), config.get("model", "unknown")
    # Real tokens, the cost from the maintained price data (None, with the reason in meta, for a model without a
    # known price), cache reads and writes apart.
    fields = ledger_fields(provider=provider, model=model, usage=usage)
    reported = (usage or {}).get("cost_usd")
    if reported is not None:
        # An agent runtime that reports what the call cost (Claude Code's session total, differenced per firing).

        fields = {**fields, "cost": Decimal(str(reported)), "meta": {**fields["meta"], "price_source": "runtime"}}
    return UsageEntry(
        idempotency_key=idempotency_key,
        kind=kind,
        provider=provider,
        model=model,
        outcome=outcome,
        owner_id=firing.workflow.owner_id,
        workflow_id=firing.workflow_id,
        generation=firing.generation,
        agent_node_id=firing.agent_node_id,
        **fields,
    )
