"""`validate_workflow_graph`: codes, never exceptions (docs/workflows.md#validate).

Every check reads the NodeSpec registry (handles, capabilities, params schema); no node type is named here.
Works on any JSON object, but is meant for the output of `normalize_workflow_graph`.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from django.conf import settings
from pydantic import ValidationError

from workflows.nodes import (
    FIRES_ON_ITS_OWN,
    IS_AGENT,
    IS_CONTEXT_PANEL,
    IS_TRIGGER,
    KIND_CONTEXT,
    KIND_TOOL,
    REQUIRES_CONTEXT,
    get_node_spec,
)

from .issues import ERROR, WARNING, GraphIssue
from .normalize import edge_id as make_edge_id
from .wiring import trigger_agents

# The sentence the chat refuses with (chat/errors.py) is the sentence Checks and Start use: one wording everywhere.
NO_ANSWERING_AGENT_MESSAGE = "This workflow has no agent connected to its chat trigger."

# The tool names every provider accepts (OpenAI's and Anthropic's rule; Gemini's is wider).
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def graph_size_issues(graph: Any) -> list[GraphIssue]:
    """The limits from settings: checked before anything else touches a graph from outside."""
    issues = []
    try:
        size = len(json.dumps(graph, separators=(",", ":"), ensure_ascii=False).encode())
    except (TypeError, ValueError):
        return [GraphIssue("MALFORMED_GRAPH", ERROR, "The graph is not JSON-serializable.")]
    if size > settings.WORKFLOW_MAX_GRAPH_BYTES:
        issues.append(
            GraphIssue(
                "GRAPH_TOO_LARGE", ERROR, f"The graph is {size} bytes; at most {settings.WORKFLOW_MAX_GRAPH_BYTES}."
            )
        )
    if isinstance(graph, dict):
        nodes, edges = graph.get("nodes"), graph.get("edges")
        if isinstance(nodes, list) and len(nodes) > settings.WORKFLOW_MAX_NODES:
            issues.append(
                GraphIssue("TOO_MANY_NODES", ERROR, f"{len(nodes)} nodes; at most {settings.WORKFLOW_MAX_NODES}.")
            )
        if isinstance(edges, list) and len(edges) > settings.WORKFLOW_MAX_EDGES:
            issues.append(
                GraphIssue("TOO_MANY_EDGES", ERROR, f"{len(edges)} edges; at most {settings.WORKFLOW_MAX_EDGES}.")
            )
    return issues


def _loc(error: dict) -> str:
    return ".".join(str(part) for part in error.get("loc", ())) or "params"


def validate_workflow_graph(graph: Any) -> list[GraphIssue]:
    if not isinstance(graph, dict):
        return [GraphIssue("MALFORMED_GRAPH", ERROR, "A graph is a JSON object with `nodes` and `edges` lists.")]
    issues = graph_size_issues(graph)
    if issues:
        return issues
    nodes = graph.get("nodes") if isinstance(graph.get("nodes"), list) else []
    edges = graph.get("edges") if isinstance(graph.get("edges"), list) else []

    by_id: dict[str, dict] = {}
    for position, node in enumerate(nodes):
        if not isinstance(node, dict):
            issues.append(GraphIssue("MALFORMED_NODE", ERROR, f"nodes[{position}] is not an object."))
            continue
        node_id = node.get("id")
        if not isinstance(node_id, str) or not node_id:
            issues.append(GraphIssue("MISSING_NODE_ID", ERROR, f"nodes[{position}] has no id."))
            continue
        if node_id in by_id:
            issues.append(GraphIssue("DUPLICATE_NODE_ID", ERROR, "Two nodes share this id.", node_id))
            continue
        by_id[node_id] = node
        issues.extend(_node_issues(node_id, node))

    incoming: dict[tuple[str, str], list[str]] = defaultdict(list)  # (target, kind) -> sources
    outgoing: dict[tuple[str, str], list[str]] = defaultdict(list)  # (source, kind) -> targets
    for position, edge in enumerate(edges):
        if not isinstance(edge, dict):
            issues.append(GraphIssue("MALFORMED_EDGE", ERROR, f"edges[{position}] is not an object."))
            continue
        kind = _edge_issues(edge, by_id, issues)
        if kind is not None:
            incoming[(edge["target"], kind)].append(edge["source"])
            outgoing[(edge["source"], kind)].append(edge["target"])

    issues.extend(_context_issues(by_id, incoming, outgoing))
    issues.extend(_tool_issues(by_id, incoming))
    issues.extend(_trigger_issues(by_id, outgoing))
    return issues


def _node_issues(node_id: str, node: dict) -> list[GraphIssue]:
    node_type = node.get("type")
    spec = get_node_spec(node_type)
    if spec is None:
        shown = node_type if isinstance(node_type, str) else json.dumps(node_type)
        shown = shown[: settings.WORKFLOW_NODE_TYPE_MAX_CHARS]
        return [GraphIssue("UNKNOWN_NODE_TYPE", ERROR, f"Unknown node type {shown!r}.", node_id, field="type")]
    params = node.get("params", {})
    if not isinstance(params, dict):
        return [GraphIssue("INVALID_PARAMS", ERROR, "params must be an object.", node_id, field="params")]
    try:
        spec.params_model.model_validate(params)
    except ValidationError as exc:
        return [
            GraphIssue(
                "INVALID_PARAMS", ERROR, f"{_loc(error)}: {error.get('msg', 'invalid')}", node_id, field=_loc(error)
            )
            for error in exc.errors(include_url=False, include_input=False)
        ]
    return []


def _edge_issues(edge: dict, by_id: dict, issues: list) -> str | None:
    """Report what is wrong with one edge; return its handle kind when it is a valid connection."""
    source, target = edge.get("source"), edge.get("target")
    source_handle, target_handle = edge.get("sourceHandle"), edge.get("targetHandle")
    this_id = edge.get("id") if isinstance(edge.get("id"), str) else None
    this_id = this_id or make_edge_id(
        *(v if isinstance(v, str) else None for v in (source, source_handle, target, target_handle))
    )
    missing = [
        name
        for name, value in (("source", source), ("target", target))
        if not isinstance(value, str) or value not in by_id
    ]
    if missing:
        issues.append(
            GraphIssue("DANGLING_EDGE", ERROR, f"The edge's {' and '.join(missing)} is not a node.", edge_id=this_id)
        )
        return None
    source_spec = get_node_spec(by_id[source].get("type"))
    target_spec = get_node_spec(by_id[target].get("type"))
    if source_spec is None or target_spec is None:
        return None  # already reported as UNKNOWN_NODE_TYPE
    if source == target:
        issues.append(GraphIssue("SELF_LOOP", ERROR, "A node cannot connect to itself.", source, this_id))
        return None
    if source_handle in source_spec.legacy_outputs and target_handle in target_spec.legacy_inputs:
        issues.append(
            GraphIssue(
                "LEGACY_MEMORY_EDGE",
                WARNING,
                "A legacy memory edge; normalization rewrites it into a Context and a tool edge.",
                target,
                this_id,
            )
        )
        return None
    out_handle = source_spec.output(source_handle) if isinstance(source_handle, str) else None
    if out_handle is None:
        issues.append(
            GraphIssue(
                "INVALID_HANDLE",
                ERROR,
                f"{source_spec.type} has no output {source_handle!r}.",
                source,
                this_id,
                "sourceHandle",
            )
        )
        return None
    # A Context edge into a type without `requiresContext` is its own rule, whatever handles that type has.
    if source_spec.has(IS_CONTEXT_PANEL) and out_handle.kind == KIND_CONTEXT and not target_spec.has(REQUIRES_CONTEXT):
        issues.append(
            GraphIssue(
                "INVALID_CONTEXT_EDGE",
                ERROR,
                f"A Context can only feed a node that requires context; {target_spec.type} does not.",
                target,
                this_id,
            )
        )
        return None
    in_handle = target_spec.input(target_handle) if isinstance(target_handle, str) else None
    if in_handle is None:
        issues.append(
            GraphIssue(
                "INVALID_HANDLE",
                ERROR,
                f"{target_spec.type} has no input {target_handle!r}.",
                target,
                this_id,
                "targetHandle",
            )
        )
        return None
    if in_handle.kind != out_handle.kind:
        issues.append(
            GraphIssue(
                "HANDLE_MISMATCH",
                ERROR,
                f"{source_handle} ({out_handle.kind}) cannot connect to {target_handle} ({in_handle.kind}).",
                target,
                this_id,
            )
        )
        return None
    return in_handle.kind


def _context_issues(by_id: dict, incoming: dict, outgoing: dict) -> list[GraphIssue]:
    issues = []
    for (target, kind), sources in incoming.items():
        if kind == KIND_CONTEXT and len(set(sources)) > 1:
            issues.append(
                GraphIssue(
                    "MULTIPLE_CONTEXTS", ERROR, f"{len(set(sources))} Contexts feed one agent; at most one.", target
                )
            )
    for (source, kind), targets in outgoing.items():
        if kind == KIND_CONTEXT and len(set(targets)) > 1:
            issues.append(
                GraphIssue(
                    "SHARED_CONTEXT", ERROR, "One Context feeds several agents; Contexts are never shared.", source
                )
            )
    return issues


def _tool_issues(by_id: dict, incoming: dict) -> list[GraphIssue]:
    issues = []
    delegates: dict[str, set[str]] = defaultdict(set)
    for (target, kind), sources in incoming.items():
        if kind != KIND_TOOL:
            continue
        names: dict[str, str] = {}
        for source in dict.fromkeys(sources):
            node = by_id[source]
            spec = get_node_spec(node.get("type"))
            for name in spec.tool_names_for(node) if spec else ():
                if not TOOL_NAME.fullmatch(name):
                    issues.append(
                        GraphIssue(
                            "INVALID_TOOL_NAME",
                            ERROR,
                            f"The tool name {name!r} is not one every provider accepts (1 to 64 letters, digits, "
                            "_ or -); untick that tool or rename it.",
                            source,
                        )
                    )
                if name in names:
                    issues.append(
                        GraphIssue(
                            "DUPLICATE_TOOL_NAME",
                            ERROR,
                            f"Two tools of this agent are both named {name!r}; rename one.",
                            target,
                        )
                    )
                names[name] = source
            if spec is not None and spec.has(IS_AGENT):
                delegates[target].add(source)
    # A teammate that can (transitively) delegate back to its lead would recurse without end.
    state: dict[str, int] = {}

    def visit(node_id: str) -> bool:
        state[node_id] = 1
        for teammate in delegates.get(node_id, ()):
            if state.get(teammate) == 1 or (state.get(teammate) is None and visit(teammate)):
                return True
        state[node_id] = 2
        return False

    for node_id in list(delegates):
        if state.get(node_id) is None and visit(node_id):
            issues.append(GraphIssue("TEAMMATE_CYCLE", ERROR, "Agents delegate to each other in a cycle.", node_id))
            break
    return issues


def _spec_has(node: dict, capability: str) -> bool:
    spec = get_node_spec(node.get("type"))
    return spec is not None and spec.has(capability)


def _trigger_issues(by_id: dict, outgoing: dict) -> list[GraphIssue]:
    issues = []
    triggers = [node_id for node_id, node in by_id.items() if _spec_has(node, IS_TRIGGER)]
    chat_triggers = [node_id for node_id in triggers if not _spec_has(by_id[node_id], FIRES_ON_ITS_OWN)]
    if len(chat_triggers) > 1:
        issues.append(
            GraphIssue("MULTIPLE_TRIGGERS", ERROR, "A workflow has at most one chat trigger.", chat_triggers[1])
        )
    # Schedules and webhooks continue the chat's one conversation, so every trigger feeds the same agent.
    answering: set[str] = set()
    for trigger in triggers:
        targets = {t for (source, _kind), ts in outgoing.items() if source == trigger for t in ts}
        if len(targets) > 1:
            issues.append(
                GraphIssue("MULTIPLE_ANSWERING_AGENTS", ERROR, "The chat trigger feeds more than one agent.", trigger)
            )
        elif answering and targets - answering:
            issues.append(
                GraphIssue(
                    "MULTIPLE_ANSWERING_AGENTS",
                    ERROR,
                    "Every trigger feeds the one answering agent (its turns continue that agent's conversation).",
                    trigger,
                )
            )
        answering |= targets
    return issues


def run_issues(graph: dict) -> list[GraphIssue]:
    """What keeps a saved graph from answering a chat: checked by Start and shown in Checks, never by a save (a
    half-built canvas may be saved). Meant for a normalized graph without errors."""
    if trigger_agents(graph):
        return []
    nodes = graph.get("nodes") if isinstance(graph.get("nodes"), list) else []
    triggers = [n.get("id") for n in nodes if isinstance(n, dict) and _spec_has(n, IS_TRIGGER)]
    return [GraphIssue("NO_ANSWERING_AGENT", ERROR, NO_ANSWERING_AGENT_MESSAGE, triggers[0] if triggers else None)]
