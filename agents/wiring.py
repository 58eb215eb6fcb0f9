"""What an agent node is wired to in a normalized graph: its Context, its tools, its teammates.

Everything is decided by NodeSpec capabilities and handles, never by a list of node types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workflows.nodes.registry import IS_AGENT, IS_CONTEXT_PANEL, get_node_spec


class AgentNotFound(LookupError):
    pass


@dataclass(frozen=True)
class ToolBinding:
    name: str  # what the model sees
    node_id: str
    node_type: str
    is_teammate: bool

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "node_id": self.node_id,
            "node_type": self.node_type,
            "is_teammate": self.is_teammate,
        }


@dataclass(frozen=True)
class AgentWiring:
    node: dict
    context_node_id: str | None
    tools: list[ToolBinding] = field(default_factory=list)


def _nodes_by_id(graph: dict) -> dict[str, dict]:
    return {n["id"]: n for n in graph.get("nodes", []) if isinstance(n, dict) and "id" in n}


def agent_wiring(graph: dict, agent_node_id: str) -> AgentWiring:
    nodes = _nodes_by_id(graph)
    node = nodes.get(agent_node_id)
    spec = get_node_spec(node.get("type")) if node else None
    if node is None or spec is None or not spec.has(IS_AGENT):
        raise AgentNotFound(f"no agent node {agent_node_id!r} in this generation's graph")
    context_node_id = None
    tools: list[ToolBinding] = []
    seen_names: set[str] = set()
    for edge in graph.get("edges", []):
        if edge.get("target") != agent_node_id:
            continue
        source = nodes.get(edge.get("source"))
        source_spec = get_node_spec(source.get("type")) if source else None
        if source_spec is None:
            continue
        handle = spec.input(edge.get("targetHandle", ""))
        if handle is None:
            continue
        if handle.kind == "context" and source_spec.has(IS_CONTEXT_PANEL):
            context_node_id = source["id"]
        elif handle.kind == "tool":
            name = source_spec.tool_name_for(source)
            if not name or name in seen_names:
                continue  # two tools with one name would be ambiguous to the model: the first wins
            seen_names.add(name)
            tools.append(ToolBinding(name, source["id"], source["type"], source_spec.has(IS_AGENT)))
    return AgentWiring(node=node, context_node_id=context_node_id, tools=tools)


def trigger_agents(graph: dict) -> list[str]:
    """Agent node ids a chat trigger feeds (`output-main -> input-main`)."""
    from workflows.nodes.registry import IS_TRIGGER

    nodes = _nodes_by_id(graph)
    result = []
    for edge in graph.get("edges", []):
        source, target = nodes.get(edge.get("source")), nodes.get(edge.get("target"))
        if not source or not target:
            continue
        source_spec, target_spec = get_node_spec(source.get("type")), get_node_spec(target.get("type"))
        feeds_agent = source_spec and target_spec and source_spec.has(IS_TRIGGER) and target_spec.has(IS_AGENT)
        if feeds_agent and edge.get("targetHandle") == "input-main" and target["id"] not in result:
            result.append(target["id"])
    return result
