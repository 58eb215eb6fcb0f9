"""normalize_workflow_graph: canonical ids, aliases, the one legacy rewrite, idempotence
(docs/workflows.md#normalize)."""

import copy

from workflows.graph import normalize_workflow_graph, validate_workflow_graph

from .factories import agent, basic_graph, context_edge, edge, edge_set, ids_of, node, tool_edge, trigger_edge

WF = 42
TRANSCRIPT_A = "## User\nWhat is our budget?\n\n## Assistant\nTwelve thousand.\n"
TRANSCRIPT_B = "## User\nPing\n\n## Assistant\nPong\n"


def legacy_two_agents() -> dict:
    return {
        "nodes": [
            node("trigger", "chatTrigger"),
            agent("writer", "Writer"),
            agent("critic", "Critic"),
            {
                "id": "mem",
                "type": "simpleMemory",
                "params": {
                    "sessionKey": "abc",
                    "contextWindowLength": 5,
                    "transcripts": {"writer": TRANSCRIPT_A, "critic": TRANSCRIPT_B},
                },
            },
        ],
        "edges": [
            trigger_edge("trigger", "writer"),
            edge("mem", "output-memory", "writer", "input-memory"),
            edge("mem", "output-memory", "critic", "input-memory"),
        ],
    }


def test_legacy_rewrite_two_agents_gets_two_contexts_one_shared_memory_and_two_records():
    # Given two agents, each fed by the same legacy memory node through a legacy edge
    result = normalize_workflow_graph(legacy_two_agents(), workflow_id=WF)
    graph = result.graph

    # Then each agent got its own Context with canonical ids in edge order
    assert ids_of(graph, "context") == ["42:context:1", "42:context:2"]
    assert ids_of(graph, "simpleMemory") == ["42:simpleMemory:1"]
    assert result.aliases == {
        "trigger": "42:chatTrigger:1",
        "writer": "42:agent:1",
        "critic": "42:agent:2",
        "mem": "42:simpleMemory:1",
    }
    edges = edge_set(graph)
    assert ("42:context:1", "output-context", "42:agent:1", "input-context") in edges
    assert ("42:context:2", "output-context", "42:agent:2", "input-context") in edges
    # ...the one shared Memory node is now a tool of both, and no legacy edge is left
    assert ("42:simpleMemory:1", "output-tool", "42:agent:1", "input-tools") in edges
    assert ("42:simpleMemory:1", "output-tool", "42:agent:2", "input-tools") in edges
    assert not any(e["sourceHandle"] == "output-memory" or e["targetHandle"] == "input-memory" for e in graph["edges"])
    # ...old memory params are gone; the transcripts became two legacy_partial records, never Memory params
    assert graph["nodes"][3]["params"] == {"reset_policy": "keep"}
    records = {(r.agent_node_id, r.context_node_id, r.memory_node_id, r.transcript) for r in result.legacy_imports}
    assert records == {
        ("42:agent:1", "42:context:1", "42:simpleMemory:1", TRANSCRIPT_A),
        ("42:agent:2", "42:context:2", "42:simpleMemory:1", TRANSCRIPT_B),
    }
    assert all(r.kind == "legacy_partial" for r in result.legacy_imports)
    codes = [w.code for w in result.warnings]
    assert codes.count("LEGACY_MEMORY_EDGE") == 2
    assert "LEGACY_VECTORS_UNRECOVERABLE" in codes
    assert validate_workflow_graph(graph) == []

    # When normalized again, nothing changes and there are no aliases and no records
    again = normalize_workflow_graph(graph, workflow_id=WF)
    assert again.graph == graph
    assert again.aliases == {}
    assert again.legacy_imports == []
    assert again.warnings == []


def test_shared_string_transcript_gives_one_record_per_agent_and_existing_context_is_reused():
    graph = legacy_two_agents()
    graph["nodes"][3]["params"] = {"transcript": TRANSCRIPT_A, "reset_policy": "clear"}
    graph["nodes"].append(node("ctx", "context"))
    graph["edges"].append(context_edge("ctx", "writer"))
    result = normalize_workflow_graph(graph, workflow_id=WF)
    # The writer already had a Context: no second one is created for it
    assert ids_of(result.graph, "context") == ["42:context:1", "42:context:2"]
    assert result.aliases["ctx"] == "42:context:1"
    assert {(r.agent_node_id, r.context_node_id) for r in result.legacy_imports} == {
        ("42:agent:1", "42:context:1"),
        ("42:agent:2", "42:context:2"),
    }
    assert result.graph["nodes"][3]["params"] == {"reset_policy": "clear"}
    assert validate_workflow_graph(result.graph) == []


def test_legacy_edge_without_transcript_makes_no_record():
    graph = legacy_two_agents()
    graph["nodes"][3]["params"] = {}
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert result.legacy_imports == []
    assert len(ids_of(result.graph, "context")) == 2


def test_canonical_ids_are_kept_and_new_nodes_take_the_next_free_number():
    graph = {
        "nodes": [agent("42:agent:3"), agent("draft-agent"), node("42:context:1", "context"), node("c2", "context")],
        "edges": [context_edge("42:context:1", "42:agent:3"), context_edge("c2", "draft-agent")],
    }
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert [n["id"] for n in result.graph["nodes"]] == ["42:agent:3", "42:agent:1", "42:context:1", "42:context:2"]
    assert result.aliases == {"draft-agent": "42:agent:1", "c2": "42:context:2"}
    # Edges follow their nodes
    assert ("42:context:2", "output-context", "42:agent:1", "input-context") in edge_set(result.graph)


def test_ids_of_another_workflow_are_recanonicalized_for_this_one():
    graph = {
        "nodes": [agent("7:agent:1"), node("7:context:1", "context")],
        "edges": [context_edge("7:context:1", "7:agent:1")],
    }
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert result.aliases == {"7:agent:1": "42:agent:1", "7:context:1": "42:context:1"}


def test_an_id_canonical_for_another_type_is_renamed():
    graph = {"nodes": [node("42:agent:1", "context"), agent("a")], "edges": [context_edge("42:agent:1", "a")]}
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert result.aliases == {"42:agent:1": "42:context:1", "a": "42:agent:1"}
    assert edge_set(result.graph) == {("42:context:1", "output-context", "42:agent:1", "input-context")}


def test_normalization_never_creates_or_reconnects_a_context_outside_the_legacy_rewrite():
    # An agent without a Context stays without one, and a detached Context stays detached
    graph = {"nodes": [node("t", "chatTrigger"), agent("a"), node("c", "context")], "edges": [trigger_edge("t", "a")]}
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert ids_of(result.graph, "context") == ["42:context:1"]
    assert not any(e["targetHandle"] == "input-context" for e in result.graph["edges"])
    assert validate_workflow_graph(result.graph) == []


def test_deleting_an_agent_leaves_its_context_in_place():
    stored = normalize_workflow_graph(basic_graph(), workflow_id=WF).graph
    without_agent = copy.deepcopy(stored)
    without_agent["nodes"] = [n for n in stored["nodes"] if n["type"] != "agent"]
    without_agent["edges"] = []
    result = normalize_workflow_graph(without_agent, workflow_id=WF)
    assert ids_of(result.graph, "context") == ["42:context:1"]


def test_edges_are_deduplicated_and_get_deterministic_ids_and_junk_fields_are_dropped():
    graph = basic_graph()
    graph["edges"].append(dict(graph["edges"][0], id="client-edge-id", animated=True))
    graph["nodes"][1]["data"] = {"label": "x"}
    graph["nodes"][1]["selected"] = True
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert len(result.graph["edges"]) == 3
    assert result.graph["edges"][0]["id"] == "42:chatTrigger:1:output-main->42:agent:1:input-main"
    assert set(result.graph["nodes"][1]) == {"id", "type", "params"}
    assert any(w.code == "DROPPED_FIELDS" and w.node_id == "lead" for w in result.warnings)


def test_duplicate_ids_get_fresh_ids_and_edges_follow_the_first():
    graph = {"nodes": [agent("a", "One"), agent("a", "Two"), node("c", "context")], "edges": [context_edge("c", "a")]}
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert [n["id"] for n in result.graph["nodes"]] == ["42:agent:1", "42:agent:2", "42:context:1"]
    assert edge_set(result.graph) == {("42:context:1", "output-context", "42:agent:1", "input-context")}
    assert any(w.code == "DUPLICATE_NODE_ID" for w in result.warnings)


def test_dangling_edges_stay_dangling_and_their_ids_are_not_handed_out():
    graph = {"nodes": [agent("a")], "edges": [tool_edge("42:todos:1", "a")]}
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert result.graph["edges"][0]["source"] == "42:todos:1"
    assert [i.code for i in validate_workflow_graph(result.graph)] == ["DANGLING_EDGE"]


def test_params_defaults_are_spelled_out_and_the_input_is_not_modified():
    graph = {"nodes": [node("m", "simpleMemory"), agent("a")], "edges": [tool_edge("m", "a")]}
    before = copy.deepcopy(graph)
    result = normalize_workflow_graph(graph, workflow_id=WF)
    assert graph == before  # pure
    assert result.graph["nodes"][0]["params"] == {"reset_policy": "keep"}
    assert result.graph["nodes"][1]["params"]["system_prompt"] == ""
