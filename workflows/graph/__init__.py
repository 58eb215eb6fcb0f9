"""The workflow graph: normalization, validation and wiring. Pure functions, no database."""

from .issues import CONTEXT_TOPOLOGY_CODES, ERROR, WARNING, GraphIssue, errors_of, has_errors, warnings_of
from .normalize import (
    GRAPH_VERSION,
    LEGACY_PARTIAL,
    NORMALIZER_VERSION,
    GraphShapeError,
    LegacyImport,
    NormalizationResult,
    edge_id,
    highest_numbers,
    is_canonical_id,
    normalize_workflow_graph,
)
from .validate import graph_size_issues, validate_workflow_graph
from .wiring import (
    AgentWiring,
    ToolBinding,
    agent_for_context,
    agent_nodes,
    agent_wiring,
    edge_kind,
    node_by_id,
    nodes_by_id,
    trigger_agents,
)

__all__ = [
    "CONTEXT_TOPOLOGY_CODES",
    "ERROR",
    "GRAPH_VERSION",
    "LEGACY_PARTIAL",
    "NORMALIZER_VERSION",
    "WARNING",
    "AgentWiring",
    "GraphIssue",
    "GraphShapeError",
    "LegacyImport",
    "NormalizationResult",
    "ToolBinding",
    "agent_for_context",
    "agent_nodes",
    "agent_wiring",
    "edge_id",
    "edge_kind",
    "errors_of",
    "graph_size_issues",
    "highest_numbers",
    "has_errors",
    "is_canonical_id",
    "node_by_id",
    "nodes_by_id",
    "trigger_agents",
    "normalize_workflow_graph",
    "validate_workflow_graph",
    "warnings_of",
]
