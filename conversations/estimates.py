"""What the next turn of a stored conversation is expected to cost: its stored size (tokens estimated at 4 bytes
each, and said to be an estimate) at the model's current input price, and the same with every stored token read
from the provider's cache. One estimate for the chat's "What this answer was sent" and the Context panel."""

from __future__ import annotations

from conversations.models import UsageRecord
from core.money import usd  # noqa: F401  (the one cost format; imported from here by the panels)
from providers import capabilities

BYTES_PER_TOKEN = 4


def next_turn_estimate(
    *, size_bytes: int, provider: str | None, model: str | None, measured_tokens: int | None = None
) -> dict | None:
    """`measured_tokens`: what the provider counted for the conversation at the agent's last answer (the Context
    panel's gauge); used instead of the size estimate when known, so a page shows one count."""
    if not provider or not model:
        return None

    measured = measured_tokens is not None and measured_tokens > 0
    tokens = int(measured_tokens) if measured else int(size_bytes or 0) // BYTES_PER_TOKEN
    free = provider == "offline"  # the built-in model: nothing to pay, as opposed to a price nobody knows
    try:
        caps = capabilities(provider, model)
        cost = caps.cost(input_tokens=tokens, cached_tokens=0, output_tokens=0)
        cached = caps.cost(input_tokens=tokens, cached_tokens=tokens, output_tokens=0)
    except Exception:  # an unknown provider or a catalogue without prices: the size is still worth showing
        return {
            "input_tokens_estimate": tokens,
            "cost": None,
            "cost_if_cached": None,
            "estimated": not measured,
            "free": free,
        }
    return {
        "input_tokens_estimate": tokens,
        # None: the model has no price (cost() says so by returning None rather than raising).
        "cost": round(cost, 6) if cost is not None else None,
        "cost_if_cached": round(cached, 6) if cached is not None else None,
        "estimated": not measured,
        "free": free,
    }


def latest_model_of(*, workflow_id: int, generation: int, agent_node_id: str) -> tuple[str, str] | None:
    """The provider and model the agent's last model call used (the ledger's newest row), or None before any."""

    row = (
        UsageRecord.objects.filter(
            workflow_id=workflow_id, generation=generation, agent_node_id=agent_node_id, kind="llm"
        )
        .order_by("-id")
        .values_list("provider", "model")
        .first()
    )
    return tuple(row) if row else None
