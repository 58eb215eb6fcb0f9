"""`normalize_workflow_graph`: one versioned, idempotent, pure pipeline (docs/workflows.md#normalize).

Used by save, get, import, deploy and loading a stored graph. It shapes nodes and edges, performs the one legacy
rewrite (old memory wiring -> Context + tool edge), gives every node its canonical id `<workflow_id>:<type>:<n>`
and makes edges follow. It never creates, reconnects or deletes a Context outside the legacy rewrite, never
touches the database and never raises on a graph that is a JSON object.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from workflows.nodes import IS_CONTEXT_PANEL, KIND_CONTEXT, KIND_TOOL, get_node_spec, specs_with

from .issues import WARNING, GraphIssue

NORMALIZER_VERSION = 1
GRAPH_VERSION = 2
NODE_FIELDS = ("id", "type", "params", "position")
LEGACY_PARTIAL = "legacy_partial"
# Offset of a Context created by the legacy rewrite from the agent it serves, so it does not sit on top of it.
_LEGACY_CONTEXT_OFFSET = (0, 160)


class GraphShapeError(ValueError):
    """The graph is not a JSON object at all; nothing can be normalized."""


@dataclass(frozen=True)
class LegacyImport:
    """A recognised legacy Markdown transcript kept as an immutable `legacy_partial` record."""

    agent_node_id: str
    context_node_id: str
    memory_node_id: str
    transcript: str
    kind: str = LEGACY_PARTIAL

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "agent_node_id": self.agent_node_id,
            "context_node_id": self.context_node_id,
            "memory_node_id": self.memory_node_id,
            "transcript_chars": len(self.transcript),
        }


@dataclass
class NormalizationResult:
    graph: dict
    aliases: dict[str, str] = field(default_factory=dict)
    warnings: list[GraphIssue] = field(default_factory=list)
    legacy_imports: list[LegacyImport] = field(default_factory=list)
    version: int = NORMALIZER_VERSION
    graph_version: int = GRAPH_VERSION


@dataclass
class _Node:
    old_id: str | None
    type: str
    params: Any
    position: dict | None
    new_id: str | None = None
    first_of_id: bool = True


@dataclass
class _Edge:
    # An endpoint is the index of a node when it resolves, else the raw id (a dangling edge the validator reports).
    source: int | str | None
    source_handle: str | None
    target: int | str | None
    target_handle: str | None


def _as_id(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _as_handle(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _as_position(value: Any) -> dict | None:
    if not isinstance(value, dict):
        return None
    x, y = value.get("x"), value.get("y")
    for coordinate in (x, y):
        if isinstance(coordinate, bool) or not isinstance(coordinate, int | float) or not math.isfinite(coordinate):
            return None
    return {"x": x, "y": y}


def id_prefix(workflow_id: int | str, node_type: str) -> str:
    return f"{workflow_id}:{node_type or 'node'}:"


def is_canonical_id(node_id: str | None, *, workflow_id: int | str, node_type: str) -> bool:
    if node_id is None:
        return False
    prefix = id_prefix(workflow_id, node_type)
    if not node_id.startswith(prefix):
        return False
    number = node_id[len(prefix) :]
    return number.isascii() and number.isdigit() and str(int(number)) == number and int(number) > 0


def highest_numbers(graph: dict, *, workflow_id: int | str) -> dict[str, int]:
    """{type: highest canonical n} of a normalized graph (what `used_numbers` must remember)."""
    highest: dict[str, int] = {}
    for node in graph.get("nodes", []):
        node_type = node.get("type") or "node"
        if is_canonical_id(node.get("id"), workflow_id=workflow_id, node_type=node.get("type") or ""):
            number = int(node["id"][len(id_prefix(workflow_id, node.get("type") or "")) :])
            highest[node_type] = max(highest.get(node_type, 0), number)
    return highest


def edge_id(source: str | None, source_handle: str | None, target: str | None, target_handle: str | None) -> str:
    return f"{source or ''}:{source_handle or ''}->{target or ''}:{target_handle or ''}"


def _first_handle(handles, kind: str) -> str | None:
    return next((h.id for h in handles if h.kind == kind), None)


def normalize_workflow_graph(
    graph: Any, *, workflow_id: int | str, used_numbers: dict[str, int] | None = None
) -> NormalizationResult:
    """`used_numbers` ({type: highest n ever given}) keeps a new node from taking the id of a deleted one: a new
    Memory node must never inherit a deleted node's namespace, nor a new Context a removed one's identity."""
    if not isinstance(graph, dict):
        raise GraphShapeError("A graph is a JSON object with `nodes` and `edges` lists.")
    warnings: list[GraphIssue] = []
    raw_nodes = graph.get("nodes", [])
    raw_edges = graph.get("edges", [])
    if not isinstance(raw_nodes, list):
        warnings.append(GraphIssue("MALFORMED_GRAPH", WARNING, "`nodes` was not a list and was ignored."))
        raw_nodes = []
    if not isinstance(raw_edges, list):
        warnings.append(GraphIssue("MALFORMED_GRAPH", WARNING, "`edges` was not a list and was ignored."))
        raw_edges = []

    nodes, index_by_old_id = _read_nodes(raw_nodes, warnings)
    edges = _read_edges(raw_edges, index_by_old_id, warnings)
    legacy = _legacy_rewrite(nodes, edges, warnings)
    aliases = _canonicalize(nodes, edges, workflow_id=workflow_id, used_numbers=used_numbers or {})
    _normalize_params(nodes)

    out_nodes = []
    for node in nodes:
        item = {"id": node.new_id, "type": node.type, "params": node.params}
        if node.position is not None:
            item["position"] = node.position
        out_nodes.append(item)

    out_edges, seen = [], set()
    for edge in edges:
        source = nodes[edge.source].new_id if isinstance(edge.source, int) else edge.source
        target = nodes[edge.target].new_id if isinstance(edge.target, int) else edge.target
        key = (source, edge.source_handle, target, edge.target_handle)
        if key in seen:
            continue
        seen.add(key)
        out_edges.append(
            {
                "id": edge_id(*key),
                "source": source,
                "sourceHandle": edge.source_handle,
                "target": target,
                "targetHandle": edge.target_handle,
            }
        )

    legacy_imports = [
        LegacyImport(
            agent_node_id=nodes[agent].new_id,
            context_node_id=nodes[context].new_id,
            memory_node_id=nodes[memory].new_id,
            transcript=transcript,
        )
        for memory, agent, context, transcript in legacy
    ]
    return NormalizationResult(
        graph={"nodes": out_nodes, "edges": out_edges},
        aliases=aliases,
        warnings=warnings,
        legacy_imports=legacy_imports,
    )


def _read_nodes(raw_nodes: list, warnings: list) -> tuple[list[_Node], dict[str, int]]:
    nodes: list[_Node] = []
    index_by_old_id: dict[str, int] = {}
    for position, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict):
            warnings.append(GraphIssue("MALFORMED_NODE", WARNING, f"nodes[{position}] is not an object; dropped."))
            continue
        old_id = _as_id(raw.get("id"))
        node_type = raw.get("type") if isinstance(raw.get("type"), str) else ""
        params = copy.deepcopy(raw["params"]) if "params" in raw and raw["params"] is not None else {}
        node = _Node(old_id=old_id, type=node_type, params=params, position=_as_position(raw.get("position")))
        dropped = sorted(str(key) for key in raw if key not in NODE_FIELDS)
        if dropped:
            warnings.append(
                GraphIssue("DROPPED_FIELDS", WARNING, f"Unknown node fields dropped: {', '.join(dropped)}.", old_id)
            )
        if old_id is not None:
            if old_id in index_by_old_id:
                node.first_of_id = False
                warnings.append(
                    GraphIssue("DUPLICATE_NODE_ID", WARNING, "A second node used this id; it got a new id.", old_id)
                )
            else:
                index_by_old_id[old_id] = len(nodes)
        nodes.append(node)
    return nodes, index_by_old_id


def _read_edges(raw_edges: list, index_by_old_id: dict[str, int], warnings: list) -> list[_Edge]:
    edges = []
    for position, raw in enumerate(raw_edges):
        if not isinstance(raw, dict):
            warnings.append(GraphIssue("MALFORMED_EDGE", WARNING, f"edges[{position}] is not an object; dropped."))
            continue
        source, target = _as_id(raw.get("source")), _as_id(raw.get("target"))
        edges.append(
            _Edge(
                source=index_by_old_id.get(source, source) if source is not None else None,
                source_handle=_as_handle(raw.get("sourceHandle")),
                target=index_by_old_id.get(target, target) if target is not None else None,
                target_handle=_as_handle(raw.get("targetHandle")),
            )
        )
    return edges


def _legacy_rewrite(nodes: list[_Node], edges: list[_Edge], warnings: list) -> list[tuple[int, int, int, str]]:
    """The one legacy rewrite: `<memory>.<legacy output> -> <agent>.<legacy input>` becomes a Context for the agent
    plus `<memory>.output-tool -> <agent>.input-tools`. Handles and the Context type come from the specs."""
    context_specs = [spec for spec in specs_with(IS_CONTEXT_PANEL) if _first_handle(spec.outputs, KIND_CONTEXT)]
    imports: list[tuple[int, int, int, str]] = []
    upgraded: dict[int, Any] = {}
    rewritten_pairs: set[tuple[int, int]] = set()
    max_chars = settings.WORKFLOW_LEGACY_TRANSCRIPT_MAX_CHARS
    for edge in list(edges):
        if not (isinstance(edge.source, int) and isinstance(edge.target, int)):
            continue
        source_spec, target_spec = get_node_spec(nodes[edge.source].type), get_node_spec(nodes[edge.target].type)
        if source_spec is None or target_spec is None:
            continue
        if edge.source_handle not in source_spec.legacy_outputs or edge.target_handle not in target_spec.legacy_inputs:
            continue
        tool_out = _first_handle(source_spec.outputs, KIND_TOOL)
        tool_in = _first_handle(target_spec.inputs, KIND_TOOL)
        context_in = _first_handle(target_spec.inputs, KIND_CONTEXT)
        if not (tool_out and tool_in and context_in and context_specs):
            continue  # nothing to rewrite into; the validator reports the edge
        memory, agent = edge.source, edge.target
        edges.remove(edge)
        pair = (memory, agent)
        if pair in rewritten_pairs:
            continue
        rewritten_pairs.add(pair)
        edges.append(_Edge(memory, tool_out, agent, tool_in))
        warnings.append(
            GraphIssue(
                "LEGACY_MEMORY_EDGE",
                WARNING,
                "A legacy memory edge was rewritten: the agent got a Context and the Memory is now a tool.",
                nodes[agent].old_id,
            )
        )

        context = next(
            (
                e.source
                for e in edges
                if e.target == agent and e.target_handle == context_in and isinstance(e.source, int)
            ),
            None,
        )
        if context is None:
            context_spec = context_specs[0]
            agent_position = nodes[agent].position
            position = None
            if agent_position is not None:
                position = {
                    "x": agent_position["x"] + _LEGACY_CONTEXT_OFFSET[0],
                    "y": agent_position["y"] + _LEGACY_CONTEXT_OFFSET[1],
                }
            nodes.append(_Node(old_id=None, type=context_spec.type, params={}, position=position))
            context = len(nodes) - 1
            edges.append(_Edge(context, _first_handle(context_spec.outputs, KIND_CONTEXT), agent, context_in))

        if memory not in upgraded:
            transcripts = None
            if source_spec.legacy_upgrade is not None:
                nodes[memory].params, transcripts = source_spec.legacy_upgrade(nodes[memory].params)
            upgraded[memory] = transcripts
            warnings.append(
                GraphIssue(
                    "LEGACY_VECTORS_UNRECOVERABLE",
                    WARNING,
                    "In-process vectors of the old memory design cannot be recovered; nothing was imported as Memory.",
                    nodes[memory].old_id,
                )
            )
        transcripts = upgraded[memory]
        transcript = transcripts.get(nodes[agent].old_id or "") if isinstance(transcripts, dict) else transcripts
        if isinstance(transcript, str) and transcript.strip():
            imports.append((memory, agent, context, transcript[:max_chars]))
    return imports


def _canonicalize(nodes: list[_Node], edges: list[_Edge], *, workflow_id, used_numbers: dict) -> dict[str, str]:
    taken: set[str] = set()
    # A dangling edge names an id no node has; never hand that id out, or the edge would silently connect.
    for edge in edges:
        for endpoint in (edge.source, edge.target):
            if isinstance(endpoint, str):
                taken.add(endpoint)
    for node in nodes:
        canonical = is_canonical_id(node.old_id, workflow_id=workflow_id, node_type=node.type)
        if node.first_of_id and canonical and node.old_id not in taken:
            node.new_id = node.old_id
            taken.add(node.old_id)
    next_number: dict[str, int] = {}
    aliases: dict[str, str] = {}
    for node in nodes:
        if node.new_id is not None:
            continue
        prefix = id_prefix(workflow_id, node.type)
        floor = used_numbers.get(node.type or "node", 0)
        number = next_number.get(prefix, (floor + 1) if isinstance(floor, int) and floor >= 0 else 1)
        while f"{prefix}{number}" in taken:
            number += 1
        node.new_id = f"{prefix}{number}"
        taken.add(node.new_id)
        next_number[prefix] = number + 1
        if node.old_id is not None and node.first_of_id:
            aliases[node.old_id] = node.new_id
    return aliases


def _normalize_params(nodes: list[_Node]) -> None:
    # Valid params get their defaults spelled out, so what is stored is what runs. Invalid ones are left as sent
    # for the validator to report with the field that is wrong.
    for node in nodes:
        spec = get_node_spec(node.type)
        if spec is None or not isinstance(node.params, dict):
            continue
        try:
            node.params = spec.params_model.model_validate(node.params).model_dump(mode="json", exclude_none=True)
        except Exception:  # noqa: S110 - any failure is the validator's to report
            pass
