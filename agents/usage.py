"""Billing a provider call to the ledger, once, whatever retries happen."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def record_llm_usage(firing, *, idempotency_key: str, kind: str, outcome: str, usage: dict | None = None) -> bool:
    from conversations.services import usage_record_append
    from providers import capabilities

    config = firing.agent_config or {}
    provider, model = config.get("provider", "unknown"), config.get("model", "unknown")
    usage = usage or {}
    tokens = {
        "input_tokens": int(usage.get("input_tokens", 0)),
        "cached_input_tokens": int(usage.get("cached_tokens", 0)),
        "output_tokens": int(usage.get("output_tokens", 0)),
        "reasoning_tokens": int(usage.get("reasoning_tokens", 0)),
    }
    cost = usage.get("cost_usd")  # what the runtime itself reported this call cost (Claude Code), when it did
    try:
        cost = (
            cost
            if cost is not None
            else capabilities(provider, model).cost(
                input_tokens=tokens["input_tokens"],
                cached_tokens=tokens["cached_input_tokens"],
                output_tokens=tokens["output_tokens"],
            )
        )
    except Exception:
        logger.warning("no price for model", extra={"provider": provider, "model": model})
    return usage_record_append(
        idempotency_key=idempotency_key,
        kind=kind,
        provider=provider,
        model=model,
        outcome=outcome,
        owner_id=firing.workflow.owner_id,
        workflow_id=firing.workflow_id,
        generation=firing.generation,
        agent_node_id=firing.agent_node_id,
        cost=cost,
        **tokens,
    )
