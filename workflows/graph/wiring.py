"""Reading a normalized graph the way the runtime needs it: who answers, and what each agent is wired to."""

from __future__ import annotations

from dataclasses import dataclass, field

from workflows.nodes import FIRES_ON_ITS_OWN, IS_AGENT, IS_TRIGGER, KIND_CONTEXT, KIND_MAIN, KIND_TOOL, get_node_spec


@dataclass(frozen=True)
class ToolBinding:
    node_id: str
    type: str
    tool_name: str
    params: dict


@dataclass(frozen=True)
class AgentWiring:
    agent_node_id: str
    context_node_id: str | None
    tool_nodes: list[ToolBinding] = field(default_factory=list)  # memory, todos, ... (not agents)
    teammates: list[ToolBinding] = field(default_factory=list)  # agents this one may delegate to
    trigger: bool = False  # the chat trigger feeds this agent: it answers the owner

    def as_dict(self) -> dict:
        return {
            "agent_node_id": self.agent_node_id,
            "context_node_id": self.context_node_id,
            "tool_nodes": [vars(t) for t in self.tool_nodes],
            "teammates": [vars(t) for t in self.teammates],
            "trigger": self.trigger,
        }


def nodes_by_id(graph: dict) -> dict[str, dict]:
    return {node["id"]: node for node in graph.get("nodes", []) if isinstance(node, dict) and "id" in node}


def node_by_id(graph: dict, node_id: str) -> dict | None:
    return nodes_by_id(graph).get(node_id)


def edge_kind(edge: dict, by_id: dict) -> str | None:
    """The kind (main, context, tool) an edge carries, or None when its ends or handles do not match."""
    source, target = by_id.get(edge.get("source")), by_id.get(edge.get("target"))
    if source is None or target is None:
        return None
    source_spec, target_spec = get_node_spec(source.get("type")), get_node_spec(target.get("type"))
    if source_spec is None or target_spec is None:
        return None
    out_handle, in_handle = source_spec.output(edge.get("sourceHandle")), target_spec.input(edge.get("targetHandle"))
    if out_handle is None or in_handle is None or out_handle.kind != in_handle.kind:
        return None
    return in_handle.kind


def agent_wiring(graph: dict, agent_node_id: str) -> AgentWiring:
    """What `agent_node_id` is wired to in a normalized (and valid) graph. Raises KeyError for an unknown node."""
    by_id = nodes_by_id(graph)
    if agent_node_id not in by_id:
        raise KeyError(agent_node_id)
    context_node_id, tools, teammates, trigger = None, [], [], False
    for edge in graph.get("edges", []):
        if edge.get("target") != agent_node_id:
            continue
        kind = edge_kind(edge, by_id)
        source = by_id.get(edge.get("source"))
        if kind is None or source is None:
            continue
        spec = get_node_spec(source.get("type"))
        if kind == KIND_CONTEXT and context_node_id is None:
            context_node_id = source["id"]
        elif kind == KIND_MAIN and spec.has(IS_TRIGGER):
            trigger = True
        elif kind == KIND_TOOL:
            binding = ToolBinding(
                node_id=source["id"],
                type=source.get("type"),
                tool_name=spec.tool_name_for(source) or source["id"],
                params=dict(source.get("params") or {}),
            )
            (teammates if spec.has(IS_AGENT) else tools).append(binding)
    return AgentWiring(agent_node_id, context_node_id, tools, teammates, trigger)


def trigger_agents(graph: dict) -> list[str]:
    """The agents a trigger feeds through a main edge (the one a chat trigger feeds answers the owner)."""
    by_id = nodes_by_id(graph)
    agents: list[str] = []
    for edge in graph.get("edges", []):
        source, target = by_id.get(edge.get("source")), by_id.get(edge.get("target"))
        if source is None or target is None or edge_kind(edge, by_id) != KIND_MAIN:
            continue
        spec, target_spec = get_node_spec(source.get("type")), get_node_spec(target.get("type"))
        if spec.has(IS_TRIGGER) and target_spec.has(IS_AGENT) and target["id"] not in agents:
            agents.append(target["id"])
    return agents


def trigger_turn_label(node: dict) -> str:
    """How a turn a trigger that fires on its own sent is named: its type's word (`extra["turn_label"]`) and the
    node's name, "Scheduled: morning summary"."""
    spec = get_node_spec(node.get("type"))
    word = spec.extra.get("turn_label", spec.label) if spec else str(node.get("type"))
    name = str((node.get("params") or {}).get("name") or node.get("id") or "")
    return f"{word}: {name}"


def self_firing_triggers(graph: dict) -> list[tuple[str, str]]:
    """(node id, turn label) of the graph's triggers that fire on their own (a schedule, a webhook), in graph order."""
    return [
        (node["id"], trigger_turn_label(node))
        for node in graph.get("nodes", [])
        if isinstance(node, dict) and (get_node_spec(node.get("type")) or _NO_SPEC).has(FIRES_ON_ITS_OWN)
    ]


def agent_for_context(graph: dict, context_node_id: str) -> str | None:
    """The agent a Context node serves (the Context panel narrows to it), or None when it feeds nothing."""
    by_id = nodes_by_id(graph)
    for edge in graph.get("edges", []):
        if edge.get("source") == context_node_id and edge_kind(edge, by_id) == KIND_CONTEXT:
            return edge.get("target")
    return None


def agent_nodes(graph: dict) -> list[dict]:
    return [n for n in graph.get("nodes", []) if (get_node_spec(n.get("type")) or _NO_SPEC).has(IS_AGENT)]


class _NoSpec:
    def has(self, capability: str) -> bool:
        return False


_NO_SPEC = _NoSpec()
