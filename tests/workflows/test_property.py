"""Property: on any JSON-object graph, normalization never raises and is idempotent, and the validator returns
codes instead of crashing."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workflows.graph import GraphIssue, normalize_workflow_graph, validate_workflow_graph

TYPES = ["chatTrigger", "agent", "context", "simpleMemory", "todos", "mystery", "", "a:b"]
HANDLES = [
    "output-main",
    "input-main",
    "output-context",
    "input-context",
    "output-tool",
    "input-tools",
    "output-memory",
    "input-memory",
    "bogus",
]

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
junk = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
ids = (
    st.sampled_from(["a", "b", "c", "42:agent:1", "42:context:1", "7:agent:2", "42:agent:01"])
    | st.integers(0, 3)
    | junk
)


@st.composite
def node_strategy(draw):
    item = {"id": draw(ids), "type": draw(st.sampled_from(TYPES) | junk)}
    if draw(st.booleans()):
        item["params"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "model": st.text(max_size=5),
                    "name": st.text(max_size=5),
                    "provider": st.sampled_from(["offline", "openai", "x"]),
                    "reset_policy": st.sampled_from(["keep", "clear", "x"]),
                    "transcript": st.text(max_size=20),
                    "transcripts": st.dictionaries(st.sampled_from(["a", "b", "c"]), st.text(max_size=10), max_size=2),
                },
            )
            | junk
        )
    if draw(st.booleans()):
        item["position"] = draw(st.fixed_dictionaries({"x": st.integers(-9, 9), "y": st.floats(-9, 9)}) | junk)
    if draw(st.booleans()):
        item[draw(st.text(max_size=5))] = draw(junk)
    return item


@st.composite
def edge_strategy(draw):
    item = {
        "source": draw(ids),
        "sourceHandle": draw(st.sampled_from(HANDLES) | junk),
        "target": draw(ids),
        "targetHandle": draw(st.sampled_from(HANDLES) | junk),
    }
    if draw(st.booleans()):
        item["id"] = draw(junk)
    if draw(st.booleans()):
        item[draw(st.text(max_size=5))] = draw(junk)
    return item


graphs = st.fixed_dictionaries(
    {
        "nodes": st.lists(node_strategy() | junk, max_size=8),
        "edges": st.lists(edge_strategy() | junk, max_size=10),
    },
    optional={"viewport": junk},
) | st.dictionaries(st.sampled_from(["nodes", "edges", "x"]), junk, max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    graph=graphs,
    workflow_id=st.sampled_from([42, 7, 1]),
    used=st.none() | st.dictionaries(st.sampled_from(TYPES + ["node"]), st.integers(-2, 5) | junk, max_size=3),
)
def test_normalization_is_total_and_idempotent_and_validation_returns_codes(graph, workflow_id, used):
    first = normalize_workflow_graph(graph, workflow_id=workflow_id, used_numbers=used)
    second = normalize_workflow_graph(first.graph, workflow_id=workflow_id, used_numbers=used)
    assert second.graph == first.graph
    assert second.aliases == {}
    assert second.legacy_imports == []
    # Every node has a unique canonical id for this workflow
    node_ids = [n["id"] for n in first.graph["nodes"]]
    assert len(node_ids) == len(set(node_ids))
    assert all(node_id.startswith(f"{workflow_id}:") for node_id in node_ids)
    for issues in (validate_workflow_graph(first.graph), validate_workflow_graph(graph)):
        assert all(isinstance(issue, GraphIssue) and issue.code.isupper() for issue in issues)
