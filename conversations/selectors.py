"""Reads for the Context panel and the REST handlers. Callers check ownership first (access_workflow)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

from django.db import connection
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate

from providers.runtimes import fidelity_of
from workflows.graph.wiring import agent_for_context, node_by_id
from workflows.models import Workflow
from workflows.nodes import IS_CONTEXT_PANEL, get_node_spec
from workflows.selectors import live_graph

from .models import (
    AgentConversation,
    ConversationMessage,
    OwnerConversationSettings,
    RetainedConversation,
    RuntimeInteractionPoint,
    RuntimeSessionBinding,
    UsageRecord,
)
from .store import compaction_status, conversation_key


@dataclass(frozen=True)
class ContextTarget:
    context_node_id: str
    agent_node_id: str | None
    agent_label: str
    label: str = ""  # what the owner calls it: the node's name, else "Context of <agent>"


def _label(node: dict | None) -> str:
    if not node:
        return ""
    params = node.get("params") or node.get("data") or {}
    return str(params.get("label") or params.get("name") or node.get("id"))


def live_context_targets(workflow: Workflow) -> list[ContextTarget]:
    """Every Context node of the live generation and the agent it serves (docs/invariants.md#panel-live-only)."""
    graph = live_graph(workflow=workflow)
    targets = []
    for node in graph.get("nodes", []):
        spec = get_node_spec(node.get("type")) if isinstance(node, dict) else None
        if spec is None or not spec.has(IS_CONTEXT_PANEL):
            continue
        agent = agent_for_context(graph, node["id"])
        agent_label = _label(node_by_id(graph, agent)) if agent else ""
        params = node.get("params") or {}
        label = str(params.get("name") or params.get("label") or "")
        if not label:
            label = f"Context of {agent_label}" if agent_label else "Unconnected Context"
        targets.append(ContextTarget(node["id"], agent, agent_label, label))
    return targets


def workflow_has_node(workflow: Workflow, node_id: str) -> bool:
    """Whether `node_id` is a node of the workflow: of its graph as saved, or of its live generation (a node removed
    since Start still has the live conversation the panel shows)."""
    graphs = (workflow.graph if isinstance(workflow.graph, dict) else {}, live_graph(workflow=workflow))
    return any(node_by_id(graph, node_id) is not None for graph in graphs)


def agent_model(workflow: Workflow, agent_node_id: str) -> tuple[str, str] | None:
    """(provider, model) of an agent node of the live generation."""
    node = node_by_id(live_graph(workflow=workflow), agent_node_id) or {}
    params = node.get("params") or {}
    if not params.get("provider"):
        return None
    return str(params["provider"]), str(params.get("model") or "")


def live_conversation_header(workflow: Workflow, agent_node_id: str) -> AgentConversation | None:
    if not workflow.live_generation:
        return None
    return AgentConversation.objects.filter(
        workflow=workflow, generation=workflow.live_generation, agent_node_id=agent_node_id
    ).first()


def conversation_message_rows(header: AgentConversation, *, offset: int = 0, limit: int = 100) -> list[dict]:
    """A page of stored wires in order: `[{position, message}]`. Bounded, so an oversized row still displays."""
    rows = (
        ConversationMessage.objects.filter(conversation=header, position__gte=offset)
        .order_by("position")
        .values_list("position", "data")[:limit]
    )
    return [{"position": position, "message": data} for position, data in rows]


def usage_totals(*, workflow_id: int, generation: int, agent_node_id: str) -> dict:
    totals = UsageRecord.objects.filter(
        workflow_id=workflow_id, generation=generation, agent_node_id=agent_node_id
    ).aggregate(
        calls=Count("id"),
        input_tokens=Sum("input_tokens"),
        cached_input_tokens=Sum("cached_input_tokens"),
        output_tokens=Sum("output_tokens"),
        reasoning_tokens=Sum("reasoning_tokens"),
        cost=Sum("cost"),
    )
    return {k: (v or 0) for k, v in totals.items()}


def usage_series(*, workflow_id: int, generation: int, agent_node_id: str, limit: int = 300) -> list[dict]:
    """The agent's model calls, oldest first (the latest `limit`): how much it sent each time (its conversation as
    the model read it) and when. The Context panel draws these against the model's window."""
    rows = list(
        UsageRecord.objects.filter(
            workflow_id=workflow_id, generation=generation, agent_node_id=agent_node_id, kind=UsageRecord.Kind.LLM
        )
        .order_by("-created_at", "-id")
        .values("created_at", "input_tokens", "output_tokens")[:limit]
    )
    rows.reverse()
    return [
        {"at": r["created_at"].isoformat(), "input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"]}
        for r in rows
    ]


def usage_per_day(*, workflow_id: int, generation: int, agent_node_id: str, days: int = 30) -> list[dict]:
    """Tokens and cost per day (UTC) for the agent, the latest `days` days that had any use."""
    rows = (
        UsageRecord.objects.filter(workflow_id=workflow_id, generation=generation, agent_node_id=agent_node_id)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), cost=Sum("cost"))
        .order_by("-day")[:days]
    )
    return [
        {
            "day": r["day"].isoformat(),
            "input_tokens": r["input_tokens"] or 0,
            "output_tokens": r["output_tokens"] or 0,
            "cost": float(r["cost"]) if r["cost"] is not None else None,
        }
        for r in reversed(list(rows))
    ]


def pressure_of(header: AgentConversation | None) -> dict | None:
    """Active context pressure (retained next-request input + output headroom) against the model's window."""
    if header is None or header.pressure_input_tokens is None:
        return None
    used = header.pressure_input_tokens + (header.pressure_output_tokens or 0)
    window = header.context_window_tokens or 0
    return {
        "input_tokens": header.pressure_input_tokens,
        "output_headroom_tokens": header.pressure_output_tokens or 0,
        "context_window_tokens": window or None,
        "fraction": round(used / window, 4) if window else None,
        "measured_at": header.pressure_measured_at,
    }


def compaction_of(workflow: Workflow, agent_node_id: str) -> dict:
    """The live conversation's compaction: one in progress, when the last one landed, summaries paid for."""
    return compaction_status(conversation_key(workflow.pk, workflow.live_generation, agent_node_id))


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def owner_own_tool_result_max_chars(owner_id: int) -> int | None:
    """The cap the owner set for their agents' tool results, or None (the site's applies)."""
    return (
        OwnerConversationSettings.objects.filter(owner_id=owner_id)
        .values_list("tool_result_max_chars", flat=True)
        .first()
    )


def owner_tool_result_max_chars(owner_id: int) -> int:
    """The cap a tool result of this owner's agents is cut to: the owner's own when set, never above the site's."""
    from django.conf import settings

    own = owner_own_tool_result_max_chars(owner_id)
    return min(own, settings.TOOL_RESULT_MAX_CHARS) if own else settings.TOOL_RESULT_MAX_CHARS


def usage_spent(*, owner_id: int, since, workflow_id: int | None = None) -> dict:
    """Tokens (input + output) and cost an owner's provider calls used since a moment, from the ledger.

    Every outcome counts: an errored or ambiguous call may have been billed all the same."""
    rows = UsageRecord.objects.filter(owner_id=owner_id, created_at__gte=since)
    if workflow_id is not None:
        rows = rows.filter(workflow_id=workflow_id)
    totals = rows.aggregate(input=Sum("input_tokens"), output=Sum("output_tokens"), cost=Sum("cost"))
    return {"tokens": (totals["input"] or 0) + (totals["output"] or 0), "cost": totals["cost"] or Decimal("0")}


def usage_keys_billed(keys: list[str]) -> set[str]:
    """Which of these idempotency keys the ledger holds a row for (the calls that were billed)."""
    if not keys:
        return set()
    return set(UsageRecord.objects.filter(idempotency_key__in=keys).values_list("idempotency_key", flat=True))


def usage_by_workflow(*, owner_id: int, since) -> list[dict]:
    """Per workflow (and per provider/model) what the owner spent since a moment, largest first."""
    rows = (
        UsageRecord.objects.filter(owner_id=owner_id, created_at__gte=since)
        .values("workflow_id", "provider", "model")
        .annotate(
            calls=Count("id"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cost=Sum("cost"),
        )
        .order_by("-input_tokens", "workflow_id", "provider", "model")
    )
    return list(rows)


def usage_by_keys(*, idempotency_keys) -> dict[str, dict]:
    """Ledger rows by their idempotency keys (`llm-step:<id>` for an agent's step): tokens, cost and outcome."""
    rows = UsageRecord.objects.filter(idempotency_key__in=list(idempotency_keys)).values(
        "idempotency_key", "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "cost", "outcome"
    )
    return {row.pop("idempotency_key"): row for row in rows}


def agent_runtime(workflow: Workflow, agent_node_id: str) -> dict | None:
    """What the live agent's conversation keeps beyond its messages: its provider's fidelity and, for Claude Code,
    the session binding (providers/README.md#fidelity). None when the agent is not in the live graph."""

    node = node_by_id(live_graph(workflow=workflow), agent_node_id)
    if node is None or node.get("type") != "agent":
        return None
    provider = (node.get("params") or {}).get("provider") or "offline"
    if provider == "vertex_agent":
        return {"provider": provider, "fidelity": fidelity_of(provider), "session": _vertex_binding(workflow, node)}
    binding = RuntimeSessionBinding.objects.filter(
        workflow=workflow, generation=workflow.live_generation, agent_node_id=agent_node_id
    ).first()
    session = None
    if binding is not None:
        session = {
            "runtime": binding.runtime,
            "session_id": binding.session_id,
            "transcript_path": binding.transcript_path,
            "matches_messages": binding.cursor_length,
            "resumable_while": "its transcript file exists on the worker and the stored conversation is unchanged",
        }
    return {"provider": provider, "fidelity": fidelity_of(provider), "session": session}


def _vertex_binding(workflow: Workflow, node: dict) -> dict | None:
    """The Vertex interaction (and environment) the next firing continues: the one recorded at the stored
    conversation's current cursor, or None when the next firing starts a new interaction from the record."""
    from .store import conversation_key, stored_cursor

    cursor = stored_cursor(conversation_key(workflow.pk, workflow.live_generation, node["id"]))
    params = node.get("params") or {}
    point = RuntimeInteractionPoint.objects.filter(
        workflow=workflow,
        generation=workflow.live_generation,
        agent_node_id=node["id"],
        agent_ref="/".join(str(params.get(k) or "") for k in ("project", "location", "agent")),
        cursor_length=cursor["length"],
        cursor_digest=cursor["digest"],
    ).first()
    if point is None:
        return None
    return {
        "runtime": point.runtime,
        "interaction_id": point.interaction_id,
        "environment_id": point.environment_id,
        "environment_pinned": bool(params.get("environment")) and params.get("environment") != "remote",
        "matches_messages": point.cursor_length,
        "kept_by_google": (
            "the interaction state (store is on by default on Google's side) and the environment's files; "
            "OpenCompany keeps the streamed events, the interaction id and the environment id"
        ),
        "continued_while": "the stored conversation is unchanged since this interaction (a rewind to an earlier "
        "point continues the interaction recorded there)",
    }


def conversation_exists(key) -> bool:
    """Whether a stored conversation (its header row) exists for the `ConversationKey`."""
    return AgentConversation.objects.filter(
        workflow_id=key.workflow_id, generation=key.generation, agent_node_id=key.agent_node_id
    ).exists()


def conversation_size_bytes(*, workflow_id: int, generation: int, agent_node_id: str) -> int | None:
    """The stored conversation's size in bytes (its header's `size_bytes`); None when nothing is stored."""
    return (
        AgentConversation.objects.filter(workflow_id=workflow_id, generation=generation, agent_node_id=agent_node_id)
        .values_list("size_bytes", flat=True)
        .first()
    )


def runtime_session_binding(key) -> RuntimeSessionBinding | None:
    """The agent runtime session (Claude Code) this stored conversation continues in, if one was recorded."""
    return RuntimeSessionBinding.objects.filter(
        workflow_id=key.workflow_id, generation=key.generation, agent_node_id=key.agent_node_id
    ).first()


def runtime_interaction_point(
    key, *, runtime: str, agent_ref: str, cursor_length: int, cursor_digest: str
) -> RuntimeInteractionPoint | None:
    """The Vertex interaction recorded at exactly this stored cursor of the conversation, for this remote agent
    (`agent_ref`: project/location/agent), if one was recorded."""
    return RuntimeInteractionPoint.objects.filter(
        workflow_id=key.workflow_id,
        generation=key.generation,
        agent_node_id=key.agent_node_id,
        runtime=runtime,
        agent_ref=agent_ref,
        cursor_length=cursor_length,
        cursor_digest=cursor_digest,
    ).first()


def file_references(hashes: set[str]) -> list[tuple[int, str]]:
    """(owner id, sha256) of the candidate hashes that stored conversations still refer to in a `file` block: the
    stored lists and the lists kept for a firing mid-turn (RetainedConversation). Clearing a Context or deleting a
    workflow deletes those rows, and with them the references (files/services.py sweeps what is left)."""
    workflows = Workflow._meta.db_table
    found: list[tuple[int, str]] = []
    with connection.cursor() as cursor:
        for sql in (
            f"SELECT DISTINCT w.owner_id, h FROM {ConversationMessage._meta.db_table} AS m "
            f"JOIN {AgentConversation._meta.db_table} AS c ON c.id = m.conversation_id "
            f"JOIN {workflows} AS w ON w.id = c.workflow_id "
            "CROSS JOIN unnest(%s::text[]) AS h WHERE m.data::text LIKE '%%' || h || '%%'",
            f"SELECT DISTINCT w.owner_id, h FROM {RetainedConversation._meta.db_table} AS r "
            f"JOIN {workflows} AS w ON w.id = r.workflow_id "
            "CROSS JOIN unnest(%s::text[]) AS h WHERE r.messages::text LIKE '%%' || h || '%%'",
        ):
            cursor.execute(sql, [sorted(hashes)])
            found.extend(cursor.fetchall())
    return found
