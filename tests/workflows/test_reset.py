"""Workflow Reset (docs/workflows.md#reset): through reset listeners and node reset hooks only."""

import ast
import inspect
import re
import textwrap

import pytest

from conversations.store import conversation_key, list_conversations, save_conversation
from core.errors import ConflictError
from memory.models import MemoryItem
from memory.services import memory_item_remember, memory_namespace_get_or_create
from providers.wire import text_message
from tests.python_source import parse
from workflows import services
from workflows.listeners import register_reset_listener, reset_listeners, unregister_reset_listener
from workflows.models import WorkflowGeneration
from workflows.nodes import node_specs
from workflows.services import reset as reset_service
from workflows.todos import todos_list, todos_tool

from .factories import agent, context_edge, node, tool_edge, trigger_edge

pytestmark = pytest.mark.django_db


def reset_graph() -> dict:
    return {
        "nodes": [
            node("trigger", "chatTrigger"),
            agent("lead", "Lead"),
            node("ctx", "context"),
            node("keep", "simpleMemory", reset_policy="keep"),
            agent("helper", "Helper"),
            node("wipe", "simpleMemory", reset_policy="clear"),
            node("todo", "todos"),
        ],
        "edges": [
            trigger_edge("trigger", "lead"),
            context_edge("ctx", "lead"),
            tool_edge("keep", "lead"),
            tool_edge("todo", "lead"),
            tool_edge("wipe", "helper"),
        ],
    }


@pytest.fixture
def running(create_workflow, owner):
    workflow = create_workflow(reset_graph())
    services.workflow_start(workflow=workflow)
    workflow.refresh_from_db()
    pk = workflow.pk
    ids = {
        "lead": f"{pk}:agent:1",
        "helper": f"{pk}:agent:2",
        "keep": f"{pk}:simpleMemory:1",
        "wipe": f"{pk}:simpleMemory:2",
        "todo": f"{pk}:todos:1",
    }
    save_conversation(
        conversation_key(pk, 1, ids["lead"]), [text_message("user", "hi"), text_message("assistant", "hello")]
    )
    save_conversation(conversation_key(pk, 1, ids["helper"]), [text_message("user", "help")])
    for name in ("keep", "wipe"):
        namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=ids[name])
        memory_item_remember(namespace=namespace, content=f"a fact in {name}", actor="test")
    todos_tool(workflow=workflow, node_id=ids["todo"], arguments={"operation": "add", "text": "write the report"})
    return workflow, ids


def _items(workflow, node_id) -> int:
    return MemoryItem.objects.filter(namespace__workflow=workflow, namespace__node_id=node_id).count()


def test_reset_admits_the_next_generation_clears_conversations_applies_memory_policy_and_empties_todos(running, owner):
    workflow, ids = running
    assert len(list_conversations(workflow)) == 2
    assert _items(workflow, ids["keep"]) == 1 and _items(workflow, ids["wipe"]) == 1
    assert "conversations" in reset_listeners()  # registered by the conversations app, not named by reset

    outcome = services.workflow_reset(workflow=workflow, actor=owner)

    workflow.refresh_from_db()
    assert (workflow.live_generation, outcome.generation.number, outcome.previous_generation) == (2, 2, 1)
    assert WorkflowGeneration.objects.get(workflow=workflow, number=1).state == "reset"
    assert outcome.generation.state == "live" and outcome.generation.admitted_by == "reset"
    assert list_conversations(workflow) == []
    assert _items(workflow, ids["keep"]) == 1  # keep survives
    assert _items(workflow, ids["wipe"]) == 0  # clear is gone
    assert todos_list(workflow=workflow, node_id=ids["todo"]) == []
    assert outcome.report["nodes"][ids["wipe"]] == 1
    assert outcome.report["nodes"][ids["keep"]] == 0
    assert outcome.report["nodes"][ids["todo"]] == 1


def test_a_retried_reset_of_the_same_generation_replays_and_a_stale_one_conflicts(running, owner):
    workflow, _ids = running
    first = services.workflow_reset(workflow=workflow, actor=owner, expected_generation=1)
    again = services.workflow_reset(workflow=workflow, actor=owner, expected_generation=1)
    assert again.replayed and again.generation.pk == first.generation.pk
    workflow.refresh_from_db()
    assert workflow.live_generation == 2
    with pytest.raises(ConflictError) as caught:
        services.workflow_reset(workflow=workflow, actor=owner, expected_generation=0)
    assert caught.value.code == "generation_conflict" and caught.value.extra == {"current_generation": 2}
    # Reset without an expected generation is always allowed and admits the next one
    assert services.workflow_reset(workflow=workflow, actor=owner).generation.number == 3


def test_reset_listeners_are_called_with_the_generations_and_a_failure_rolls_the_reset_back(running, owner):
    workflow, ids = running
    seen = []

    def listener(**kwargs):
        seen.append(kwargs)
        raise RuntimeError("chat store unavailable")

    register_reset_listener(listener, name="tests.failing")
    try:
        with pytest.raises(RuntimeError):
            services.workflow_reset(workflow=workflow, actor=owner)
    finally:
        unregister_reset_listener("tests.failing")
    assert seen[0]["previous_generation"] == 1 and seen[0]["new_generation"] == 2
    workflow.refresh_from_db()
    assert workflow.live_generation == 1
    assert _items(workflow, ids["wipe"]) == 1
    assert len(list_conversations(workflow)) == 2


def _code_without_docstrings(function) -> str:
    tree = parse(textwrap.dedent(inspect.getsource(function)))
    for item in ast.walk(tree):
        body = getattr(item, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            item.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)  # comments are gone too: only code is checked


def test_the_reset_service_names_no_node_type_and_no_other_app():
    source = "".join(
        _code_without_docstrings(f)
        for f in (services.workflow_reset, reset_service._reset_attempt, reset_service._reset_nodes)
    )
    assert "reset_execution_state" in source and "reset_listeners" in source
    for spec in node_specs():
        assert f'"{spec.type}"' not in source and f"'{spec.type}'" not in source
    for word in ("simpleMemory", "todos", "context", "conversations", "chat", "memory_namespace"):
        assert not re.search(rf"\b{word}\b", source), word


def test_reset_of_a_never_started_workflow_admits_generation_one(create_workflow, owner):
    workflow = create_workflow(reset_graph())
    outcome = services.workflow_reset(workflow=workflow, actor=owner)
    assert (outcome.previous_generation, outcome.generation.number) == (0, 1)


def test_a_new_node_type_resets_through_its_own_hook_without_touching_the_reset_service(create_workflow, owner):
    from pydantic import BaseModel, ConfigDict

    from workflows.nodes import KIND_TOOL, Handle, NodeSpec, register_node_spec, unregister_node_spec

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

    calls = []

    def hook(workflow, node, *, policy_context):
        calls.append((workflow.pk, node["id"], policy_context.previous_generation, policy_context.new_generation))
        return 7

    register_node_spec(
        NodeSpec(
            type="scratchpad",
            label="Scratchpad",
            params_model=Params,
            outputs=(Handle("output-tool", KIND_TOOL),),
            tool_name="scratchpad",
            reset_execution_state=hook,
        )
    )
    try:
        graph = {"nodes": [agent("a"), node("s", "scratchpad")], "edges": [tool_edge("s", "a")]}
        workflow = create_workflow(graph)
        outcome = services.workflow_reset(workflow=workflow, actor=owner)
    finally:
        unregister_node_spec("scratchpad")
    assert calls == [(workflow.pk, f"{workflow.pk}:scratchpad:1", 0, 1)]
    assert outcome.report["nodes"][f"{workflow.pk}:scratchpad:1"] == 7
