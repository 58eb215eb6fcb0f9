"""Reads of the runtime other apps use: what a firing's requests were made of ("what this answer was sent"), and
the owner's run history (what ran, how long, what it cost, why it ended).

Built from what the firing already records — its config and tools, each step's request counts (`LlmStep.
request_info`), its tool results, the usage ledger — never from a second copy of the conversation.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, Max, Q

from agents.models import Firing, LlmStep, ToolCallResult
from conversations.models import UsageRecord
from conversations.selectors import usage_by_keys
from provider_keys.secrets import SecretUnavailable, owner_secret_values
from providers.errors import scrub
from workflows.graph import self_firing_triggers

_EXCERPT = 160


@dataclass(frozen=True)
class FiringOutcome:
    """What another app may know of a firing's progress: its state and, once it ended, how."""

    state: str  # queued | running | finished | stopped | failed
    final_text: str = ""
    error_code: str = ""
    error_message: str = ""
    finished_at: datetime | None = None

    @property
    def ended(self) -> bool:
        return self.state in Firing.TERMINAL_STATES

    @property
    def queued(self) -> bool:
        return self.state == Firing.State.QUEUED


def firing_outcome_of(firing: Firing) -> FiringOutcome:
    """The outcome of a firing row the caller was handed (an observer's hook gets the row itself)."""
    return FiringOutcome(
        state=firing.state,
        final_text=firing.final_text or "",
        error_code=firing.error_code or "",
        error_message=firing.error_message or "",
        finished_at=firing.finished_at,
    )


def firing_outcome(*, firing_id) -> FiringOutcome | None:
    """The firing's outcome read now; None when there is no such firing."""
    firing = (
        Firing.objects.filter(pk=firing_id)
        .only("state", "final_text", "error_code", "error_message", "finished_at")
        .first()
    )
    return firing_outcome_of(firing) if firing is not None else None


def firing_saved_a_turn(*, firing_id) -> bool:
    """Whether any step of the firing was persisted (its turn, user message included, reached the store)."""
    return LlmStep.objects.filter(firing_id=firing_id, state=LlmStep.State.PERSISTED).exists()


def tool_call_result_content(*, firing_id, tool_call_id: str) -> str:
    """The latest recorded result of one tool call of the firing ("" before it has one)."""
    content = (
        ToolCallResult.objects.filter(firing_id=firing_id, tool_call_id=tool_call_id)
        .order_by("-id")
        .values_list("content", flat=True)
        .first()
    )
    return content or ""


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
    firing = Firing.objects.filter(pk=firing_id).first()
    if firing is None:
        return None
    config = firing.agent_config or {}
    steps = list(LlmStep.objects.filter(firing=firing).order_by("iteration"))
    usage = usage_by_keys(idempotency_keys=[f"llm-step:{step.pk}" for step in steps])
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
                    name: (record or {}).get(name) or 0
                    for name in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
                },
                "cost": str(record["cost"]) if record and record.get("cost") is not None else None,
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


# --- the run history -------------------------------------------------------------------------------------------
# Tool results are the model's working data (memory contents among them): the history shows a tool call's name,
# outcome and size, and the text of failed calls only, which is what explains a failed answer.

ERROR_PREVIEW_CHARS = 500
# A tool call's arguments and result as the run detail shows them (folded): enough to see what happened.
DETAIL_PREVIEW_CHARS = 4000
MAX_DELEGATION_DEPTH_SHOWN = 8


def last_firing_at(*, workflow_ids) -> dict[int, object]:
    """{workflow_id: when its latest firing was created}, for the workflows list's "last activity"."""
    rows = (
        Firing.objects.filter(workflow_id__in=list(workflow_ids)).values("workflow_id").annotate(last=Max("created_at"))
    )
    return {row["workflow_id"]: row["last"] for row in rows}


def _duration_ms(start, end) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds() * 1000)


def _firing_summary(firing: Firing) -> dict:
    return {
        "id": str(firing.pk),
        "kind": "test_run" if firing.generation == 0 else ("chat" if firing.chat_run_id else "delegation"),
        "generation": firing.generation,
        "agent_node_id": firing.agent_node_id,
        "agent_name": (firing.agent_config or {}).get("name") or firing.agent_node_id,
        "provider": (firing.agent_config or {}).get("provider", ""),
        "model": (firing.agent_config or {}).get("model", ""),
        "chat_run_id": firing.chat_run_id,
        # The schedule or webhook trigger whose message it answered ("Scheduled: morning summary"), else None.
        "trigger": (
            {"node_id": firing.trigger_node_id, "label": firing.trigger_label} if firing.trigger_node_id else None
        ),
        "parent_id": str(firing.parent_id) if firing.parent_id else None,
        "state": firing.state,
        "end_reason": firing.end_reason,
        "error_code": firing.error_code,
        "error_message": firing.error_message,
        "iterations": firing.iteration,
        "tokens": firing.tokens_used,
        "prompt_preview": firing.prompt[:200],
        "created_at": firing.created_at,
        "started_at": firing.started_at,
        "finished_at": firing.finished_at,
        "duration_ms": _duration_ms(firing.started_at or firing.created_at, firing.finished_at),
    }


CHAT_TRIGGER_FILTER = "chat"


def workflow_runs(
    *, workflow, limit: int = 50, generation: int | None = None, trigger: str | None = None
) -> list[dict]:
    """The workflow's recent top-level firings (a chat answer, a test run), newest first, with counts of their
    steps, tool calls and teammate delegations. Bounded queries: one for the firings, one for the counts.

    `trigger`: only the answers to one schedule or webhook trigger (its node id), or `"chat"` for the answers to
    the owner's own messages."""
    firings = Firing.objects.filter(workflow=workflow, parent__isnull=True)
    if generation is not None:
        firings = firings.filter(generation=generation)
    if trigger == CHAT_TRIGGER_FILTER:
        firings = firings.filter(chat_run_id__isnull=False, trigger_node_id="")
    elif trigger:
        firings = firings.filter(trigger_node_id=trigger)
    firings = list(
        firings.annotate(
            step_count=Count("steps", distinct=True),
            tool_call_count=Count("tool_results", distinct=True),
            delegation_count=Count("children", distinct=True),
            failed_step_count=Count("steps", filter=~Q(steps__state__in=["completed", "persisted"]), distinct=True),
        ).order_by("-created_at")[:limit]
    )
    rows = []
    for firing in firings:
        row = _firing_summary(firing)
        row.update(
            steps=firing.step_count,
            tool_calls=firing.tool_call_count,
            delegations=firing.delegation_count,
            failed_steps=firing.failed_step_count,
        )
        rows.append(row)
    return rows


def workflow_run_triggers(*, workflow) -> list[dict]:
    """What the run history can be filtered by: "Chat" (the owner's own messages), then the workflow's schedule
    and webhook triggers as its graph has them, then triggers that fired before and are no longer in it."""
    choices = [{"value": CHAT_TRIGGER_FILTER, "label": "Chat"}]
    seen = {CHAT_TRIGGER_FILTER}
    graph = workflow.graph if isinstance(workflow.graph, dict) else {}
    for node_id, label in self_firing_triggers(graph):
        choices.append({"value": node_id, "label": label})
        seen.add(node_id)
    past = (
        Firing.objects.filter(workflow=workflow, parent__isnull=True)
        .exclude(trigger_node_id="")
        .values_list("trigger_node_id", "trigger_label")
        .order_by("trigger_node_id", "-created_at")
        .distinct("trigger_node_id")
    )
    for node_id, label in past:
        if node_id not in seen:
            choices.append({"value": node_id, "label": f"{label} (removed)"})
    return choices


def workflow_compactions(*, workflow, limit: int = 50) -> list[dict]:
    """The workflow's recent compaction summaries from the ledger, newest first: each call (ok, error, ambiguous)
    and each summary discarded because the turns it summarised changed (docs/invariants.md#compaction)."""
    rows = (
        UsageRecord.objects.filter(workflow_id=workflow.pk, kind=UsageRecord.Kind.COMPACTION)
        .order_by("-created_at", "-pk")
        .values("created_at", "generation", "agent_node_id", "outcome", "input_tokens", "output_tokens", "cost", "meta")
    )
    return [{**row, "reason": (row.pop("meta") or {}).get("reason", "")} for row in rows[:limit]]


def _step_rows(firing: Firing, usage: dict) -> list[dict]:
    rows = []
    for step in firing.steps.order_by("iteration"):
        result = step.result or {}
        step_usage = usage.get(f"llm-step:{step.pk}") or {}
        tokens = result.get("usage") or {}
        calls = [
            block.get("name")
            for block in ((result.get("message") or {}).get("blocks") or [])
            if isinstance(block, dict) and block.get("type") == "tool_call"
        ]
        rows.append(
            {
                "iteration": step.iteration,
                "state": step.state,
                "error_code": step.error_code,
                "duration_ms": step.duration_ms,
                "stop_reason": result.get("stop_reason"),
                "tool_calls": calls,
                "input_tokens": int(step_usage.get("input_tokens") or tokens.get("input_tokens") or 0),
                "output_tokens": int(step_usage.get("output_tokens") or tokens.get("output_tokens") or 0),
                "cost": step_usage.get("cost"),
                "billed": step_usage.get("outcome"),
            }
        )
    return rows


ARGUMENTS_PREVIEW_CHARS = 2000


def _clip(text: str) -> str:
    return text if len(text) <= DETAIL_PREVIEW_CHARS else text[:DETAIL_PREVIEW_CHARS] + "…"


def _call_arguments(firing: Firing) -> dict[str, dict | str]:
    """{tool call id: its arguments (a dict, or the raw text the model sent when it was not JSON)}, from the steps'
    answers."""
    found = {}
    for result in firing.steps.values_list("result", flat=True):
        for block in ((result or {}).get("message") or {}).get("blocks") or []:
            if isinstance(block, dict) and block.get("type") == "tool_call" and block.get("id"):
                arguments = block.get("arguments")
                found[str(block["id"])] = str(block.get("arguments_raw") or "") if arguments is None else arguments
    return found


def _shown(arguments: dict | str, *, indent: int | None) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, indent=indent, default=str)


def _redacted(text: str, firing: Firing, binding: dict) -> str:
    """A remote tool's arguments or error as run history shows them: the values of the secrets its server's headers
    carry are never shown, even if the model (or the server) repeated one."""
    headers = ((binding.get("meta") or {}).get("server") or {}).get("headers") or []
    if not headers:
        return text
    try:
        values = owner_secret_values(owner_id=firing.workflow.owner_id, names=[h["secret"] for h in headers])
    except SecretUnavailable:
        return text
    # A header value is often "<scheme> <credential>" (Bearer, Basic): the credential alone is hidden too.
    hidden = [part for value in values.values() for part in (value, value.partition(" ")[2].strip())]
    return scrub(text, sorted(hidden, key=len, reverse=True))


def _tool_rows(firing: Firing) -> list[dict]:
    rows = []
    bindings = {b["name"]: b for b in firing.tool_bindings or []}
    arguments = _call_arguments(firing)
    for result in ToolCallResult.objects.filter(firing=firing).order_by("iteration", "id"):
        binding = bindings.get(result.name) or {}
        meta = binding.get("meta") or {}
        server = meta.get("server") or {}
        called_with = arguments.get(result.tool_call_id, "")
        row = {
            "iteration": result.iteration,
            "tool_call_id": result.tool_call_id,
            "name": result.name,
            "is_error": result.is_error,
            "result_chars": len(result.content),
            "error_preview": result.content[:ERROR_PREVIEW_CHARS] if result.is_error else "",
            "arguments_preview": _clip(_shown(called_with, indent=2)) if called_with != "" else "",
            "result_preview": _clip(result.content),
            "delegated_to": str(result.child_firing_id) if result.child_firing_id else None,
            "state": result.state,
            "duration_ms": result.duration_ms,
            "server": (server.get("server") if server.get("transport") == "stdio" else server.get("url")) or "",
            "tool": meta.get("tool") or "",
            "arguments": "",
        }
        if binding.get("remote"):
            # Nothing of a remote tool's secrets reaches run history, whatever the model or the server repeated.
            row["arguments"] = _redacted(
                _shown(called_with or {}, indent=None)[:ARGUMENTS_PREVIEW_CHARS], firing, binding
            )
            for field in ("error_preview", "arguments_preview", "result_preview"):
                row[field] = _redacted(row[field], firing, binding)
        rows.append(row)
    return rows


def _firing_detail(firing: Firing, depth: int) -> dict:

    step_ids = list(LlmStep.objects.filter(firing=firing).values_list("pk", flat=True))
    usage = usage_by_keys(idempotency_keys=[f"llm-step:{pk}" for pk in step_ids])
    data = _firing_summary(firing)
    data["steps"] = _step_rows(firing, usage)
    data["tool_calls"] = _tool_rows(firing)
    costs = [row["cost"] for row in data["steps"] if row["cost"] is not None]
    data["cost"] = sum(costs, Decimal(0)) if costs else None
    data["input_tokens"] = sum(row["input_tokens"] for row in data["steps"])
    data["output_tokens"] = sum(row["output_tokens"] for row in data["steps"])
    data["answer"] = firing.final_text
    children = Firing.objects.filter(parent=firing).order_by("created_at")
    data["delegations"] = (
        [_firing_detail(child, depth + 1) for child in children] if depth < MAX_DELEGATION_DEPTH_SHOWN else []
    )
    return data


def workflow_run_detail(*, workflow, firing_id) -> dict | None:
    """One firing of `workflow` with its steps, tool calls, usage and the teammates it delegated to (nested);
    None when the id is not a firing of this workflow."""
    try:
        firing_uuid = uuid.UUID(str(firing_id))
    except ValueError:
        return None
    firing = Firing.objects.filter(workflow=workflow, pk=firing_uuid).first()
    if firing is None:
        return None
    return _firing_detail(firing, 0)
