"""Reads of the runtime other apps use: what a firing's requests were made of ("what this answer was sent").

Built from what the firing already records — its config and tools, each step's request counts (`LlmStep.
request_info`), its tool results, the usage ledger — never from a second copy of the conversation.
"""

from __future__ import annotations

import json
from decimal import Decimal

from agents.models import Firing, LlmStep, ToolCallResult

_EXCERPT = 160


def _recalled(results: list[ToolCallResult], memory_tools: set[str]) -> list[dict]:
    """The memories recalled in the firing, with their scores, from the recall results the model was given."""
    recalled = []
    for result in results:
        if result.name not in memory_tools or result.is_error:
            continue
        try:
            body = json.loads(result.content)
        except ValueError:
            continue  # cut past the owner's cap: not shown rather than guessed
        for item in body.get("items") or []:
            if isinstance(item, dict) and "score" in item:
                recalled.append(
                    {
                        "id": item.get("id"),
                        "title": item.get("title") or "",
                        "content": str(item.get("content") or "")[:_EXCERPT],
                        "score": item.get("score"),
                        "version": item.get("version"),
                        "iteration": result.iteration,
                    }
                )
    return recalled


def firing_request_view(*, firing_id) -> dict | None:
    """What each request of a firing carried: the system prompt, how many messages (how many stored, whether a
    compaction summary led them), the tools offered, the memories recalled, and each call's tokens and cost."""
    from conversations.models import UsageRecord

    firing = Firing.objects.filter(pk=firing_id).first()
    if firing is None:
        return None
    config = firing.agent_config or {}
    steps = list(LlmStep.objects.filter(firing=firing).order_by("iteration"))
    usage = {
        row.idempotency_key: row
        for row in UsageRecord.objects.filter(idempotency_key__in=[f"llm-step:{step.pk}" for step in steps])
    }
    memory_tools = {binding["name"] for binding in firing.tool_bindings if binding.get("node_type") == "simpleMemory"}
    results = list(ToolCallResult.objects.filter(firing=firing).order_by("iteration", "id"))
    step_views = []
    for step in steps:
        record = usage.get(f"llm-step:{step.pk}")
        step_views.append(
            {
                "iteration": step.iteration,
                "state": step.state,
                "duration_ms": step.duration_ms,
                "request": step.request_info or {},
                "usage": {
                    "input_tokens": record.input_tokens if record else 0,
                    "cached_input_tokens": record.cached_input_tokens if record else 0,
                    "output_tokens": record.output_tokens if record else 0,
                    "reasoning_tokens": record.reasoning_tokens if record else 0,
                },
                "cost": str(record.cost) if record and record.cost is not None else None,
            }
        )
    total_cost = sum((Decimal(s["cost"]) for s in step_views if s["cost"] is not None), Decimal(0))
    return {
        "firing_id": str(firing.pk),
        "agent_node_id": firing.agent_node_id,
        "provider": config.get("provider"),
        "model": config.get("model"),
        "system_prompt": config.get("system_prompt", ""),
        "tools": [
            {"name": b["name"], "description": b.get("description", ""), "teammate": b.get("is_teammate", False)}
            for b in firing.tool_bindings
        ],
        "steps": step_views,
        "recalled_memories": _recalled(results, memory_tools),
        "tokens": {
            key: sum(step["usage"][key] for step in step_views)
            for key in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
        },
        "cost": str(total_cost) if any(s["cost"] is not None for s in step_views) else None,
    }
