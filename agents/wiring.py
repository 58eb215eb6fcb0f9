"""What an agent node is wired to in a normalized graph: its Context, its tools, its teammates.

Everything is decided by NodeSpec capabilities and handles, never by a list of node types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workflows.graph.wiring import edge_kind, nodes_by_id
from workflows.nodes import KIND_CONTEXT, KIND_TOOL
from workflows.nodes.registry import IS_AGENT, IS_CONTEXT_PANEL, get_node_spec


class AgentNotFound(LookupError):
    pass


@dataclass(frozen=True)
class ToolBinding:
    name: str  # what the model sees
    node_id: str
    node_type: str
    is_teammate: bool
    # From the node's tool offer (workflows.nodes.ToolOffer); a teammate's are filled in by prepare.
    description: str = ""
    parameters: dict | None = None
    meta: dict = field(default_factory=dict)
    remote: bool = False
    approval: bool = False  # each call waits for the owner's approval (agents/services/approvals.py)

    def to_dict(self) -> dict:
        data = {
            "name": self.name,
            "node_id": self.node_id,
            "node_type": self.node_type,
            "is_teammate": self.is_teammate,
        }
        if self.parameters is not None:
            data.update(description=self.description, parameters=self.parameters)
        if self.meta:
            data["meta"] = self.meta
        if self.remote:
            data["remote"] = True
        if self.approval:
            data["approval"] = True
        return data


@dataclass(frozen=True)
class AgentWiring:
    node: dict
    context_node_id: str | None
    tools: list[ToolBinding] = field(default_factory=list)


def agent_wiring(graph: dict, agent_node_id: str) -> AgentWiring:
    """The agent's Context and its tools in edge order (teammates included), as the runtime binds them. Edges are
    read the way the workflows app reads them (`workflows.graph.edge_kind`)."""
    nodes = nodes_by_id(graph)
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
        kind = edge_kind(edge, nodes)
        source = nodes.get(edge.get("source"))
        source_spec = get_node_spec(source.get("type")) if source else None
        if kind is None or source_spec is None:
            continue
        if kind == KIND_CONTEXT and source_spec.has(IS_CONTEXT_PANEL):
            context_node_id = source["id"]
        elif kind == KIND_TOOL:
            for binding in _tool_bindings(source, source_spec):
                if binding.name in seen_names:
                    continue  # two tools with one name would be ambiguous to the model: the first wins
                seen_names.add(binding.name)
                tools.append(binding)
    return AgentWiring(node=node, context_node_id=context_node_id, tools=tools)


def _tool_bindings(source: dict, spec) -> list[ToolBinding]:
    """What one tool node offers, through its NodeSpec's tool contract (`tools_for`). A node whose type offers no
    tool contract still gets a binding by its name, so prepare can fail the firing saying so (`ToolUnavailable`)."""
    if spec.has(IS_AGENT):
        name = spec.tool_name_for(source)
        return [ToolBinding(name, source["id"], source["type"], True)] if name else []
    offers = spec.tools_for(source)
    if not offers and spec.tools is None:
        name = spec.tool_name_for(source)
        return [ToolBinding(name, source["id"], source["type"], False)] if name else []
    return [
        ToolBinding(
            offer.name,
            source["id"],
            source["type"],
            False,
            description=offer.description,
            parameters=offer.parameters,
            meta=dict(offer.meta),
            remote=offer.remote,
            approval=offer.approval,
        )
        for offer in offers
    ]
