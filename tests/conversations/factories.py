"""Builders for conversation tests: realistic MessageWire dicts and a started workflow with a Context."""

from __future__ import annotations

import json

from providers.wire import text_message, tool_call_block, tool_result_message
from workflows.models import Workflow, WorkflowGeneration


def user(text: str) -> dict:
    return text_message("user", text)


def system(text: str = "You are careful.") -> dict:
    return text_message("system", text)


def assistant(text: str = "", *, calls: list[tuple[str, str, dict | str]] = ()) -> dict:
    blocks = [{"type": "text", "text": text}] if text else []
    for call_id, name, arguments in calls:
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        blocks.append(tool_call_block(id=call_id, name=name, arguments_raw=raw))
    return {"role": "assistant", "blocks": blocks}


def result(call_id: str, content: str = "ok", *, name: str = "memory", is_error: bool = False) -> dict:
    return tool_result_message(tool_call_id=call_id, name=name, content=content, is_error=is_error)


def turn(n: int, *, tool: bool = True, result_size: int = 200) -> list[dict]:
    """One owner turn: question, a tool call and its result, then the answer."""
    if not tool:
        return [user(f"question {n}"), assistant(f"answer {n}")]
    call_id = f"call_{n}"
    return [
        user(f"question {n}"),
        assistant(f"looking up {n}", calls=[(call_id, "memory", {"operation": "recall", "query": f"q{n}"})]),
        result(call_id, f"result {n} " + "x" * result_size),
        assistant(f"answer {n}"),
    ]


def started_workflow(owner, *, name: str = "w", agents: int = 1, generation: int = 1) -> Workflow:
    """A workflow whose live generation has `agents` agents, each with its own Context node."""
    workflow = Workflow.objects.create(owner=owner, name=name)
    nodes, edges = [], []
    for i in range(1, agents + 1):
        agent_id, context_id = f"{workflow.pk}:agent:{i}", f"{workflow.pk}:context:{i}"
        nodes.append({"id": agent_id, "type": "agent", "params": {"label": f"Agent {i}", "provider": "offline"}})
        nodes.append({"id": context_id, "type": "context", "params": {}})
        edges.append(
            {
                "id": f"e{i}",
                "source": context_id,
                "sourceHandle": "output-context",
                "target": agent_id,
                "targetHandle": "input-context",
            }
        )
    graph = {"nodes": nodes, "edges": edges}
    workflow.graph = graph
    workflow.live_generation = generation
    workflow.save()
    for number in range(1, generation + 1):
        WorkflowGeneration.objects.create(
            workflow=workflow,
            number=number,
            graph=graph,
            state=WorkflowGeneration.State.LIVE if number == generation else WorkflowGeneration.State.STOPPED,
        )
    return workflow
