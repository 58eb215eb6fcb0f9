"""validate_workflow_graph: codes with node ids and fields, read from the NodeSpec registry."""

import pytest
from pydantic import BaseModel, ConfigDict

from workflows.graph import normalize_workflow_graph, validate_workflow_graph
from workflows.nodes import REQUIRES_CONTEXT, Handle, NodeSpec, register_node_spec, unregister_node_spec
from workflows.nodes.registry import KIND_CONTEXT

from .factories import agent, basic_graph, context_edge, edge, node, tool_edge, trigger_edge

WF = 42


def issues_of(graph: dict) -> list[tuple]:
    normalized = normalize_workflow_graph(graph, workflow_id=WF).graph
    return [(i.code, i.severity, i.node_id, i.field) for i in validate_workflow_graph(normalized)]


def codes(graph: dict) -> list[str]:
    return [code for code, *_ in issues_of(graph)]


def test_the_basic_graph_and_the_empty_graph_are_valid():
    assert issues_of(basic_graph(with_todos=True)) == []
    assert issues_of({"nodes": [], "edges": []}) == []


def test_an_agent_without_a_context_is_valid():
    graph = {"nodes": [node("t", "chatTrigger"), agent("a")], "edges": [trigger_edge("t", "a")]}
    assert issues_of(graph) == []


def test_context_edge_into_a_node_without_requires_context():
    graph = {"nodes": [node("c", "context"), node("m", "simpleMemory")], "edges": [context_edge("c", "m")]}
    assert codes(graph) == ["INVALID_CONTEXT_EDGE"]


def test_two_contexts_on_one_agent_and_one_context_on_two_agents():
    two_on_one = {
        "nodes": [agent("a"), node("c1", "context"), node("c2", "context")],
        "edges": [context_edge("c1", "a"), context_edge("c2", "a")],
    }
    assert codes(two_on_one) == ["MULTIPLE_CONTEXTS"]
    shared = {
        "nodes": [agent("a", "A"), agent("b", "B"), node("c", "context")],
        "edges": [context_edge("c", "a"), context_edge("c", "b")],
    }
    assert codes(shared) == ["SHARED_CONTEXT"]


def test_legacy_memory_edge_is_a_warning_on_the_raw_graph():
    raw = {"nodes": [agent("a"), node("m", "simpleMemory")], "edges": [edge("m", "output-memory", "a", "input-memory")]}
    issues = validate_workflow_graph(raw)
    assert [(i.code, i.severity) for i in issues] == [("LEGACY_MEMORY_EDGE", "warning")]


def test_unknown_type_bad_params_dangling_edge_and_wrong_handles_name_the_node_and_field():
    graph = {
        "nodes": [
            node("x", "mystery"),
            {"id": "a", "type": "agent", "params": {"provider": "nope", "model": "", "temperature": 9, "extra": 1}},
            node("m", "simpleMemory", reset_policy="sometimes"),
            agent("b", "B"),
        ],
        "edges": [
            tool_edge("ghost", "b"),
            edge("m", "output-main", "b", "input-tools"),
            edge("m", "output-tool", "b", "input-main"),
        ],
    }
    found = issues_of(graph)
    assert ("UNKNOWN_NODE_TYPE", "error", "42:mystery:1", "type") in found
    fields = {f for code, _s, node_id, f in found if code == "INVALID_PARAMS" and node_id == "42:agent:1"}
    assert fields == {"provider", "model", "temperature", "extra"}
    assert ("INVALID_PARAMS", "error", "42:simpleMemory:1", "reset_policy") in found
    assert ("DANGLING_EDGE", "error", None, None) in found
    assert ("INVALID_HANDLE", "error", "42:simpleMemory:1", "sourceHandle") in found
    assert ("HANDLE_MISMATCH", "error", "42:agent:2", None) in found


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"name": "n" * 81}, "name"),
        ({"system_prompt": "p" * 20_001}, "system_prompt"),
        ({"compaction_threshold": 0.99}, "compaction_threshold"),
        ({"compaction_threshold": 0.05}, "compaction_threshold"),
        ({"thinking": "max"}, "thinking"),
        ({"max_output_tokens": 10_000_000}, "max_output_tokens"),
        ({"max_iterations": 0}, "max_iterations"),
    ],
)
def test_agent_params_are_bounded(params, field):
    graph = {"nodes": [agent("a", **params) if "name" not in params else agent("a", params["name"])], "edges": []}
    assert ("INVALID_PARAMS", "error", "42:agent:1", field) in issues_of(graph)


def test_agent_param_limits_come_from_settings(settings):
    settings.WORKFLOW_AGENT_SYSTEM_PROMPT_MAX_CHARS = 10
    assert codes({"nodes": [agent("a", system_prompt="x" * 11)], "edges": []}) == ["INVALID_PARAMS"]


def test_graph_limits_from_settings(settings):
    settings.WORKFLOW_MAX_NODES = 2
    graph = {"nodes": [agent("a"), agent("b", "B"), agent("c", "C")], "edges": []}
    assert codes(graph) == ["TOO_MANY_NODES"]


def test_duplicate_tool_names_and_teammate_cycles():
    graph = {
        "nodes": [agent("a", "Lead"), node("m1", "simpleMemory"), node("m2", "simpleMemory")],
        "edges": [tool_edge("m1", "a"), tool_edge("m2", "a")],
    }
    assert codes(graph) == ["DUPLICATE_TOOL_NAME"]
    cycle = {
        "nodes": [agent("a", "Alpha"), agent("b", "Beta")],
        "edges": [edge("a", "output-tool", "b", "input-tools"), edge("b", "output-tool", "a", "input-tools")],
    }
    assert codes(cycle) == ["TEAMMATE_CYCLE"]


def test_one_trigger_answering_one_agent():
    graph = {
        "nodes": [node("t", "chatTrigger"), node("t2", "chatTrigger"), agent("a", "A"), agent("b", "B")],
        "edges": [trigger_edge("t", "a"), trigger_edge("t", "b")],
    }
    assert set(codes(graph)) == {"MULTIPLE_TRIGGERS", "MULTIPLE_ANSWERING_AGENTS"}


def test_capability_checks_use_requires_context_not_a_type_list():
    # Given a new type that declares requiresContext, registered without touching the validator
    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

    spec = NodeSpec(
        type="reviewer",
        label="Reviewer",
        params_model=Params,
        inputs=(Handle("input-context", KIND_CONTEXT),),
        capabilities=frozenset({REQUIRES_CONTEXT}),
    )
    register_node_spec(spec)
    try:
        graph = {"nodes": [node("r", "reviewer"), node("c", "context")], "edges": [context_edge("c", "r")]}
        assert issues_of(graph) == []
        # And a Context into a type that does not require one is refused by capability alone
        unregister_node_spec("reviewer")
        register_node_spec(NodeSpec(type="reviewer", label="R", params_model=Params, inputs=spec.inputs))
        assert codes(graph) == ["INVALID_CONTEXT_EDGE"]
    finally:
        unregister_node_spec("reviewer")
