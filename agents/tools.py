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
from workflows.nodes.registry import ToolCall, ToolText, get_node_spec

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


class ToolUnavailable(LookupError):
    """A node wired as a tool whose type offers no tool contract (no schema or no call hook)."""


def _tool_spec(binding: dict):
    spec = get_node_spec(binding["node_type"])
    if spec is None or spec.tool_call is None or (spec.tool_schema is None and spec.tools is None):
        raise ToolUnavailable(
            f"The node {binding['node_id']!r} ({binding['node_type']}) is wired as a tool, but its type offers no tool."
        )
    return spec


def tool_definition(binding: dict, graph_nodes: dict[str, dict]) -> ToolDefinition:
    if binding["is_teammate"]:
        params = graph_nodes.get(binding["node_id"], {}).get("params") or {}
        name = params.get("name") or binding["name"]
        return ToolDefinition(
            name=binding["name"],
            description=f"Delegate a task to your teammate {name}. Their final answer comes back as the result.",
            parameters=TEAMMATE_SCHEMA,
        )
    _tool_spec(binding)  # a node whose type offers no tool contract cannot be offered
    if binding.get("parameters") is None:
        raise ToolUnavailable(
            f"The node {binding['node_id']!r} ({binding['node_type']}) is wired as a tool, but its type offers no tool."
        )
    return ToolDefinition(name=binding["name"], description=binding["description"], parameters=binding["parameters"])


def _as_outcome(result: dict | ToolText) -> ToolOutcome:
    if isinstance(result, ToolText):
        return ToolOutcome(result.text, is_error=result.is_error)
    failed = bool(result.get("error")) or result.get("ok") is False
    return ToolOutcome(json.dumps(result, ensure_ascii=False, default=str), is_error=failed)


def prepare_tool_calls(*, firing, message: dict) -> None:
    """Work a turn's tool calls can do before the transaction that answers them (under the firing's row lock, where
    no remote call may run), through each tool's `tool_prepare` hook (a memory recall embeds its query). Never
    raises."""
    bindings = {b["name"]: b for b in firing.tool_bindings if not b.get("is_teammate")}
    for call in message.get("blocks", []):
        binding = bindings.get(call.get("name")) if call.get("type") == "tool_call" else None
        spec = get_node_spec(binding["node_type"]) if binding else None
        if spec is None or spec.tool_prepare is None:
            continue
        try:
            spec.tool_prepare(call.get("arguments"), workflow=firing.workflow, node_id=binding["node_id"])
        except Exception:
            logger.warning("tool preparation failed", extra={"firing_id": str(firing.id), "tool": binding["name"]})


REMOTE_NOT_RUN_TEXT = "Not run: this call was not made before the turn was saved."


def _unreadable_arguments(call: dict) -> ToolOutcome | None:
    if isinstance(call.get("arguments"), dict):
        return None
    reason = call.get("parse_error") or "the arguments are not a JSON object"
    return ToolOutcome(
        f"Error: could not read the arguments of this `{call.get('name')}` call ({reason}). "
        "Call the tool again with a JSON object that matches its schema.",
        is_error=True,
    )


def _tool_call(firing, binding: dict, call: dict, should_stop=None) -> ToolCall:
    return ToolCall(
        owner=firing.workflow.owner,
        workflow=firing.workflow,
        node_id=binding["node_id"],
        arguments=call["arguments"],
        # A retried step answers with the first receipt instead of writing again.
        idempotency_key=f"{firing.id}:{call['id']}",
        actor=f"agent:{firing.agent_node_id}",
        origin={
            "firing_id": str(firing.id),
            "chat_run_id": firing.chat_run_id,
            "agent_node_id": firing.agent_node_id,
            "agent_name": (firing.agent_config or {}).get("name", ""),
            "generation": firing.generation,
            "tool_call_id": call["id"],
            "prompt": firing.prompt,
        },
        meta=binding.get("meta") or {},
        should_stop=should_stop,
    )


def run_tool(*, firing, binding: dict, call: dict) -> ToolOutcome:
    """Run one non-teammate tool call inside a savepoint, so a failing tool cannot poison the turn's transaction; a
    Test run's (generation 0) savepoint is always rolled back.

    A remote tool is never run here (this is inside the firing's transaction): its call was made before, by
    `agents.services.remote_tools`; reaching here it was not made at all (Stop, or unreadable arguments)."""
    unreadable = _unreadable_arguments(call)
    if unreadable is not None:
        return unreadable
    if binding.get("remote"):
        return ToolOutcome(REMOTE_NOT_RUN_TEXT, is_error=True)
    try:
        spec = _tool_spec(binding)
        with transaction.atomic():
            result = spec.tool_call(_tool_call(firing, binding, call))
            if firing.generation == 0:
                # A Test run leaves no trace: the call sees the live memory and todos, and what it wrote is rolled
                # back with this savepoint (its on-commit broadcasts go with it). The model still gets the result.
                transaction.set_rollback(True)
    except ToolUnavailable as exc:
        return ToolOutcome(f"Error: {exc}", is_error=True)
    except Exception as exc:
        logger.exception("tool failed", extra={"firing_id": str(firing.id), "tool": binding["name"]})
        return ToolOutcome(f"Error: the tool `{binding['name']}` failed ({type(exc).__name__}). Try again later.", True)
    return _as_outcome(result)


def run_remote_tool(*, firing, binding: dict, call: dict, should_stop=None) -> ToolOutcome:
    """Make one remote tool call (an MCP server's tool), outside any transaction; `should_stop` cancels it."""
    unreadable = _unreadable_arguments(call)
    if unreadable is not None:
        return unreadable
    try:
        result = _tool_spec(binding).tool_call(_tool_call(firing, binding, call, should_stop))
    except ToolUnavailable as exc:
        return ToolOutcome(f"Error: {exc}", is_error=True)
    except Exception as exc:
        logger.exception("tool failed", extra={"firing_id": str(firing.id), "tool": binding["name"]})
        return ToolOutcome(f"Error: the tool `{binding['name']}` failed ({type(exc).__name__}).", True)
    return _as_outcome(result)


def unknown_tool_outcome(name: str, available: list[str]) -> ToolOutcome:
    names = ", ".join(f"`{n}`" for n in available) or "none"
    return ToolOutcome(f"Error: there is no tool named `{name}`. Available tools: {names}.", is_error=True)
