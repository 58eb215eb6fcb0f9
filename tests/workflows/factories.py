"""Graph builders for workflow tests (client-style ids; the services canonicalize them)."""

from __future__ import annotations


def agent(node_id: str, name: str = "Agent", **params) -> dict:
    return {
        "id": node_id,
        "type": "agent",
        "params": {"name": name, "provider": "offline", "model": "offline-echo", **params},
    }


def node(node_id: str, node_type: str, **params) -> dict:
    return {"id": node_id, "type": node_type, "params": params}


def edge(source: str, source_handle: str, target: str, target_handle: str) -> dict:
    return {"source": source, "sourceHandle": source_handle, "target": target, "targetHandle": target_handle}


def trigger_edge(trigger: str, agent_id: str) -> dict:
    return edge(trigger, "output-main", agent_id, "input-main")


def context_edge(context: str, agent_id: str) -> dict:
    return edge(context, "output-context", agent_id, "input-context")


def tool_edge(tool: str, agent_id: str) -> dict:
    return edge(tool, "output-tool", agent_id, "input-tools")


def basic_graph(*, memory_policy: str = "keep", with_todos: bool = False) -> dict:
    """chatTrigger -> agent with a Context and a Memory tool (and optionally todos)."""
    nodes = [
        node("trigger", "chatTrigger"),
        agent("lead", "Lead"),
        node("ctx", "context"),
        node("mem", "simpleMemory", reset_policy=memory_policy),
    ]
    edges = [trigger_edge("trigger", "lead"), context_edge("ctx", "lead"), tool_edge("mem", "lead")]
    if with_todos:
        nodes.append(node("todo", "todos"))
        edges.append(tool_edge("todo", "lead"))
    return {"nodes": nodes, "edges": edges}


def ids_of(graph: dict, node_type: str) -> list[str]:
    return [n["id"] for n in graph["nodes"] if n["type"] == node_type]


def edge_set(graph: dict) -> set[tuple]:
    return {(e["source"], e["sourceHandle"], e["target"], e["targetHandle"]) for e in graph["edges"]}
