"""A graph from outside on its way into storage: name and shape checks, normalization, validation, the node
numbers a workflow has handed out, legacy import records. Every graph that enters storage comes through
`prepare_graph`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from django.conf import settings

from core.errors import ServiceError
from core.text import require_visible_name

from ..graph import (
    CONTEXT_TOPOLOGY_CODES,
    GraphShapeError,
    NormalizationResult,
    errors_of,
    graph_size_issues,
    highest_numbers,
    normalize_workflow_graph,
    validate_workflow_graph,
    warnings_of,
)
from ..graph.shape import graph_nul_path, graph_shape_errors
from ..models import LegacyImportRecord, Workflow
from ..nodes import IS_CONTEXT_PANEL, get_node_spec

EMPTY_GRAPH = {"nodes": [], "edges": []}


@dataclass
class GraphOutcome:
    """A stored workflow plus what normalization said about the graph it was given."""

    workflow: Workflow
    aliases: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)  # list of issue dicts
    legacy_imports: list = field(default_factory=list)  # list of dicts (no transcript text)
    extra: dict = field(default_factory=dict)


def clean_workflow_name(name) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ServiceError("invalid_name", "A workflow needs a non-empty name.")
    name = require_visible_name(name.strip())
    if len(name) > settings.WORKFLOW_NAME_MAX_CHARS:
        raise ServiceError("invalid_name", f"The name is at most {settings.WORKFLOW_NAME_MAX_CHARS} characters.")
    return name


def used_numbers(workflow: Workflow) -> dict[str, int]:
    """What `normalize_workflow_graph(used_numbers=...)` must not hand out again for this workflow."""
    merged = dict(workflow.node_numbers or {}) if isinstance(workflow.node_numbers, dict) else {}
    stored = workflow.graph if isinstance(workflow.graph, dict) else EMPTY_GRAPH
    for node_type, number in highest_numbers(stored, workflow_id=workflow.pk).items():
        merged[node_type] = max(int(merged.get(node_type, 0) or 0), number)
    return merged


def remember_numbers(workflow: Workflow, graph: dict) -> None:
    merged = used_numbers(workflow)
    for node_type, number in highest_numbers(graph, workflow_id=workflow.pk).items():
        merged[node_type] = max(merged.get(node_type, 0), number)
    workflow.node_numbers = merged


def prepare_graph(*, graph, workflow_id: int, used: dict | None = None) -> tuple[NormalizationResult, list]:
    """Shape-check, size-check, normalize and validate a graph from outside; raise with the issues when it has
    errors. A wrongly shaped graph is refused whole: normalizing it would drop what it cannot read."""
    shape_errors = graph_shape_errors(graph)
    if shape_errors:
        raise ServiceError(
            "invalid_request",
            "The graph is not shaped like a workflow graph.",
            extra={"errors": {"graph": shape_errors}},
        )
    nul_path = graph_nul_path(graph)
    if nul_path:
        raise ServiceError("invalid_graph", f"{nul_path} holds a NUL character, which cannot be stored.")
    size_issues = graph_size_issues(graph)
    if size_issues:
        raise ServiceError(
            "graph_too_large", size_issues[0].message, extra={"issues": [i.as_dict() for i in size_issues]}
        )
    try:
        result = normalize_workflow_graph(graph, workflow_id=workflow_id, used_numbers=used)
    except GraphShapeError as exc:
        raise ServiceError("invalid_graph", str(exc)) from None
    issues = validate_workflow_graph(result.graph)
    errors = errors_of(issues)
    if errors:
        topology = any(issue.code in CONTEXT_TOPOLOGY_CODES for issue in errors)
        raise ServiceError(
            "invalid_context_topology" if topology else "invalid_graph",
            "The graph has errors: " + "; ".join(f"{e.code} ({e.node_id or e.edge_id or 'graph'})" for e in errors[:5]),
            extra={
                "issues": [i.as_dict() for i in result.warnings + issues],
                "aliases": result.aliases,
            },
        )
    return result, result.warnings + warnings_of(issues)


def persist_legacy_imports(workflow: Workflow, result: NormalizationResult) -> list[dict]:
    # Committed in the same transaction that retires the legacy topology, so a transcript is never lost.
    records = []
    for item in result.legacy_imports:
        digest = hashlib.sha256(item.transcript.encode()).hexdigest()
        LegacyImportRecord.objects.get_or_create(
            workflow=workflow,
            agent_node_id=item.agent_node_id,
            digest=digest,
            defaults={
                "kind": item.kind,
                "context_node_id": item.context_node_id,
                "memory_node_id": item.memory_node_id,
                "transcript": item.transcript,
            },
        )
        records.append(item.as_dict())
    return records


def graph_outcome(workflow, result, warnings, legacy) -> GraphOutcome:
    return GraphOutcome(
        workflow=workflow,
        aliases=dict(result.aliases),
        warnings=[w.as_dict() for w in warnings],
        legacy_imports=legacy,
    )


def context_node_ids(graph: dict) -> set[str]:
    ids = set()
    for node in graph.get("nodes", []):
        spec = get_node_spec(node.get("type"))
        if spec is not None and spec.has(IS_CONTEXT_PANEL):
            ids.add(node["id"])
    return ids
