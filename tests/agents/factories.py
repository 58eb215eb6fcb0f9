"""Workflows wired for runtime tests, built through the workflows services (normalized, started)."""

from __future__ import annotations

from workflows.services import workflow_create, workflow_start


def agent_node(node_id: str, name: str, *, provider: str = "offline", model: str = "offline-echo", **params) -> dict:
    return {
        "id": node_id,
        "type": "agent",
        "params": {"name": name, "provider": provider, "model": model, "system_prompt": f"You are {name}.", **params},
    }


def edge(source: str, source_handle: str, target: str, target_handle: str) -> dict:
    return {"source": source, "sourceHandle": source_handle, "target": target, "targetHandle": target_handle}


def started_workflow(owner, nodes: list[dict], edges: list[dict], *, name: str = "runtime test"):
    """Create, normalize and start a workflow; returns (workflow, generation number, {draft id: canonical id})."""
    outcome = workflow_create(owner=owner, name=name, graph={"nodes": nodes, "edges": edges})
    generation, _ = workflow_start(workflow=outcome.workflow)
    workflow = outcome.workflow
    workflow.refresh_from_db()
    ids = {draft: outcome.aliases.get(draft, draft) for draft in [n["id"] for n in nodes]}
    return workflow, generation.number, ids


def assistant_with(owner, *, context: bool = True, memory: bool = False, todos: bool = False, **agent_params):
    nodes = [{"id": "trigger", "type": "chatTrigger", "params": {}}, agent_node("lead", "Lead", **agent_params)]
    edges = [edge("trigger", "output-main", "lead", "input-main")]
    if context:
        nodes.append({"id": "ctx", "type": "context", "params": {}})
        edges.append(edge("ctx", "output-context", "lead", "input-context"))
    if memory:
        nodes.append({"id": "mem", "type": "simpleMemory", "params": {"reset_policy": "keep"}})
        edges.append(edge("mem", "output-tool", "lead", "input-tools"))
    if todos:
        nodes.append({"id": "todo", "type": "todos", "params": {}})
        edges.append(edge("todo", "output-tool", "lead", "input-tools"))
    return started_workflow(owner, nodes, edges)
