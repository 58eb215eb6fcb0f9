"""The `todos` tool: operations, validation errors the model can act on, limits, schema."""

import pytest

from workflows.nodes import get_node_spec
from workflows.todos import todos_list, todos_tool, todos_tool_schema

from .factories import basic_graph

pytestmark = pytest.mark.django_db


@pytest.fixture
def todo_node(create_workflow):
    workflow = create_workflow(basic_graph(with_todos=True))
    return workflow, f"{workflow.pk}:todos:1"


def test_add_list_complete_reopen_remove(todo_node):
    workflow, node_id = todo_node
    first = todos_tool(workflow=workflow, node_id=node_id, arguments={"operation": "add", "text": "  draft  "})
    second = todos_tool(workflow=workflow, node_id=node_id, arguments={"operation": "add", "text": "review"})
    assert first["ok"] and first["item"]["text"] == "draft" and first["item"]["order"] == 1
    assert second["item"]["order"] == 2
    done = todos_tool(
        workflow=workflow, node_id=node_id, arguments={"operation": "complete", "item_id": first["item"]["id"]}
    )
    assert done["item"]["done"] is True
    reopened = todos_tool(
        workflow=workflow,
        node_id=node_id,
        arguments={"operation": "complete", "item_id": first["item"]["id"], "done": False},
    )
    assert reopened["item"]["done"] is False
    removed = todos_tool(
        workflow=workflow, node_id=node_id, arguments={"operation": "remove", "item_id": second["item"]["id"]}
    )
    assert removed["removed"]["text"] == "review"
    listed = todos_tool(workflow=workflow, node_id=node_id, arguments={"operation": "list"})
    assert [i["text"] for i in listed["items"]] == ["draft"]


def test_lists_are_per_node(todo_node, create_workflow):
    workflow, node_id = todo_node
    todos_tool(workflow=workflow, node_id=node_id, arguments={"operation": "add", "text": "mine"})
    assert todos_list(workflow=workflow, node_id="other") == []


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ("not an object", "invalid_arguments"),
        ({}, "unknown_operation"),
        ({"operation": "explode"}, "unknown_operation"),
        ({"operation": "add"}, "invalid_arguments"),
        ({"operation": "add", "text": "   "}, "invalid_arguments"),
        ({"operation": "add", "text": "x", "namespace": "other"}, "invalid_arguments"),
        ({"operation": "complete"}, "invalid_arguments"),
        ({"operation": "complete", "item_id": True}, "invalid_arguments"),
        ({"operation": "complete", "item_id": 999999}, "unknown_item"),
        ({"operation": "remove", "item_id": 999999}, "unknown_item"),
        ({"operation": "complete", "item_id": 1, "done": "yes"}, "invalid_arguments"),
    ],
)
def test_bad_calls_answer_a_tool_error_not_an_exception(todo_node, arguments, code):
    workflow, node_id = todo_node
    result = todos_tool(workflow=workflow, node_id=node_id, arguments=arguments)
    assert result["ok"] is False and result["error"]["code"] == code and result["error"]["message"]


def test_limits_come_from_settings(todo_node, settings):
    workflow, node_id = todo_node
    settings.WORKFLOW_TODOS_MAX_ITEMS = 2
    settings.WORKFLOW_TODOS_TEXT_MAX_CHARS = 5
    long = todos_tool(workflow=workflow, node_id=node_id, arguments={"operation": "add", "text": "toolong"})
    assert long["error"]["code"] == "text_too_long"
    for text in ("a", "b"):
        assert todos_tool(workflow=workflow, node_id=node_id, arguments={"operation": "add", "text": text})["ok"]
    full = todos_tool(workflow=workflow, node_id=node_id, arguments={"operation": "add", "text": "c"})
    assert full["error"]["code"] == "too_many_items"


def test_an_item_of_another_workflow_cannot_be_touched(todo_node, create_workflow):
    workflow, node_id = todo_node
    other = create_workflow(basic_graph(with_todos=True), name="other")
    item = todos_tool(workflow=other, node_id=f"{other.pk}:todos:1", arguments={"operation": "add", "text": "theirs"})
    result = todos_tool(
        workflow=workflow, node_id=node_id, arguments={"operation": "remove", "item_id": item["item"]["id"]}
    )
    assert result["error"]["code"] == "unknown_item"
    assert len(todos_list(workflow=other, node_id=f"{other.pk}:todos:1")) == 1


def test_schema_and_spec_declare_the_tool():
    schema = todos_tool_schema()
    assert schema["name"] == "todos"
    assert schema["parameters"]["properties"]["operation"]["enum"] == ["add", "list", "complete", "remove"]
    spec = get_node_spec("todos")
    assert spec.tool_name == "todos" and spec.tool_schema() == schema
    assert get_node_spec("simpleMemory").tool_schema()["name"] == "memory"


@pytest.mark.django_db(transaction=True)
def test_concurrent_adds_respect_the_cap_without_locking_the_workflow_row(create_workflow, settings):
    # The tool runs under its firing's row lock, so it must not take the workflow row (lock order); adds to one list
    # still queue, so two at once cannot both pass the cap.
    import threading
    import time

    from django.db import connection, transaction

    from workflows.models import TodoItem, Workflow

    workflow = create_workflow(basic_graph(with_todos=True))
    node_id = f"{workflow.pk}:todos:1"
    settings.WORKFLOW_TODOS_MAX_ITEMS = 1
    held, release, results = threading.Event(), threading.Event(), []

    def update_the_workflow_row():  # what a workflow save holds: FOR NO KEY UPDATE
        try:
            with transaction.atomic():
                Workflow.objects.select_for_update(no_key=True).get(pk=workflow.pk)
                held.set()
                release.wait(timeout=60)
        finally:
            connection.close()

    def add(text):
        try:
            results.append(todos_tool(workflow=workflow, node_id=node_id, arguments={"operation": "add", "text": text}))
        finally:
            connection.close()

    holder = threading.Thread(target=update_the_workflow_row)
    holder.start()
    assert held.wait(timeout=10)
    adders = [threading.Thread(target=add, args=(f"item {n}",)) for n in range(2)]
    for thread in adders:
        thread.start()
    deadline = time.monotonic() + 10
    for thread in adders:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    finished_while_held = not any(thread.is_alive() for thread in adders)
    release.set()
    holder.join()
    for thread in adders:
        thread.join()
    assert finished_while_held
    assert sorted(r["ok"] for r in results) == [False, True]
    assert TodoItem.objects.filter(workflow=workflow, node_id=node_id).count() == 1
