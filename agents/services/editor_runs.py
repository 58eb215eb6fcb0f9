"""The manual run from the editor: the saved draft's answering agent answers once, on generation 0."""

from __future__ import annotations

from core.errors import ServiceError
from workflows.graph import errors_of, normalize_workflow_graph, trigger_agents, validate_workflow_graph
from workflows.models import Workflow

from .firings import FiringRefused, firing_start


def firing_test_run(*, workflow: Workflow, prompt: str) -> str:
    """Fire the draft's answering agent with `prompt` on generation 0 (docs/workflows.md, the `test-run` endpoint),
    which stores no conversation and never touches the live generation or the chat. Returns the firing id; the run
    history endpoints report its progress and answer. The agent's tools run, but what they write is rolled back
    (agents/tools.py `run_tool`): a test run leaves memory and todos as they were."""
    graph = normalize_workflow_graph(
        workflow.graph if isinstance(workflow.graph, dict) else {"nodes": [], "edges": []}, workflow_id=workflow.pk
    ).graph
    errors = errors_of(validate_workflow_graph(graph))
    if errors:
        raise ServiceError(
            "invalid_graph",
            "Fix the graph's errors before a test run.",
            extra={"issues": [e.as_dict() for e in errors]},
        )
    agents = trigger_agents(graph)
    if not agents:
        raise ServiceError(
            "no_answering_agent", "Wire a chat trigger to an agent first: the test run asks the agent it feeds."
        )
    try:
        return firing_start(workflow=workflow, generation=0, agent_node_id=agents[0], prompt=prompt)
    except FiringRefused as exc:
        raise ServiceError(exc.code, exc.message) from None
