"""The tools an agent can call, and how one call is run.

A tool error (bad arguments, a refused operation, an exception inside a tool) becomes an
`is_error` result the model can act on; it never crashes the firing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from django.db import transaction

from providers.types import ToolDefinition

logger = logging.getLogger(__name__)

TEAMMATE_SCHEMA = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "What the teammate should do, with all it needs to know."}
    },
    "required": ["task"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False


def _memory_definition() -> dict:
    from memory.tool import memory_tool_definition

    return memory_tool_definition()


def _todos_definition() -> dict:
    from workflows.todos import todos_tool_schema

    return todos_tool_schema()


def tool_definition(binding: dict, graph_nodes: dict[str, dict]) -> ToolDefinition:
    if binding["is_teammate"]:
        params = graph_nodes.get(binding["node_id"], {}).get("params") or {}
        name = params.get("name") or binding["name"]
        return ToolDefinition(
            name=binding["name"],
            description=f"Delegate a task to your teammate {name}. Their final answer comes back as the result.",
            parameters=TEAMMATE_SCHEMA,
        )
    definition = {"simpleMemory": _memory_definition, "todos": _todos_definition}[binding["node_type"]]()
    return ToolDefinition(
        name=binding["name"], description=definition["description"], parameters=definition["parameters"]
    )


def _as_outcome(result: dict) -> ToolOutcome:
    failed = bool(result.get("error")) or result.get("ok") is False
    return ToolOutcome(json.dumps(result, ensure_ascii=False, default=str), is_error=failed)


def prepare_tool_calls(*, firing, message: dict) -> None:
    """Work a turn's tool calls can do before the transaction that answers them (under the firing's row lock, where
    no remote call may run): today, embedding the queries of `memory` recalls. Never raises."""
    memory_nodes = {
        b["name"]: b["node_id"]
        for b in firing.tool_bindings
        if b.get("node_type") == "simpleMemory" and not b.get("is_teammate")
    }
    calls = [b for b in message.get("blocks", []) if b.get("type") == "tool_call" and b.get("name") in memory_nodes]
    if not calls:
        return
    from memory.query_vectors import prefetch_recall_query

    for call in calls:
        prefetch_recall_query(call.get("arguments"), workflow=firing.workflow, node_id=memory_nodes[call["name"]])


def run_tool(*, firing, binding: dict, call: dict) -> ToolOutcome:
    """Run one non-teammate tool call inside a savepoint, so a failing tool cannot poison the turn's transaction."""
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        reason = call.get("parse_error") or "the arguments are not a JSON object"
        return ToolOutcome(
            f"Error: could not read the arguments of this `{call.get('name')}` call ({reason}). "
            "Call the tool again with a JSON object that matches its schema.",
            is_error=True,
        )
    try:
        with transaction.atomic():
            if binding["node_type"] == "simpleMemory":
                from memory.tool import memory_tool_call

                result = memory_tool_call(
                    owner=firing.workflow.owner,
                    workflow=firing.workflow,
                    node_id=binding["node_id"],
                    arguments=arguments,
                    # A retried step answers with the first receipt instead of writing again.
                    idempotency_key=f"{firing.id}:{call['id']}",
                    actor=f"agent:{firing.agent_node_id}",
                )
            elif binding["node_type"] == "todos":
                from workflows.todos import todos_tool

                result = todos_tool(workflow=firing.workflow, node_id=binding["node_id"], arguments=arguments)
            else:
                return ToolOutcome(f"Error: the tool `{binding['name']}` cannot be run here.", is_error=True)
    except Exception as exc:
        logger.exception("tool failed", extra={"firing_id": str(firing.id), "tool": binding["name"]})
        return ToolOutcome(f"Error: the tool `{binding['name']}` failed ({type(exc).__name__}). Try again later.", True)
    return _as_outcome(result)


def unknown_tool_outcome(name: str, available: list[str]) -> ToolOutcome:
    names = ", ".join(f"`{n}`" for n in available) or "none"
    return ToolOutcome(f"Error: there is no tool named `{name}`. Available tools: {names}.", is_error=True)
