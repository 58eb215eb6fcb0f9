"""The `todos` tool: a small checklist per `todos` node, called by the agent runtime.

`todos_tool` never raises for something the model did wrong: it answers `{"ok": False, "error": {code, message}}`
so the runtime can hand the model a tool error it can act on (the memory tool's rule, docs/memory.md#tool-errors,
applied to todos too).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max

from .locks import todo_item_for_update
from .models import TodoItem, Workflow

TOOL_NAME = "todos"
OPERATIONS = ("add", "list", "complete", "remove")


def todos_tool_schema() -> dict:
    """The tool definition the model sees (name, description, JSON Schema of the arguments)."""
    return {
        "name": TOOL_NAME,
        "description": (
            "A checklist for the current work. operation=add with `text` adds an item; list shows all items; "
            "complete with `item_id` marks one done (done=false reopens it); remove with `item_id` deletes one."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": list(OPERATIONS)},
                "text": {"type": "string", "maxLength": settings.WORKFLOW_TODOS_TEXT_MAX_CHARS},
                "item_id": {"type": "integer"},
                "done": {"type": "boolean"},
            },
            "required": ["operation"],
            "additionalProperties": False,
        },
    }


class _ToolError(Exception):
    def __init__(self, code: str, message: str):
        self.code, self.message = code, message


def _item_dict(item: TodoItem) -> dict:
    return {"id": item.pk, "text": item.text, "done": item.done, "order": item.order}


def todos_list(*, workflow: Workflow, node_id: str) -> list[dict]:
    return [_item_dict(item) for item in TodoItem.objects.filter(workflow=workflow, node_id=node_id)]


def todos_clear(*, workflow: Workflow, node_id: str | None = None) -> int:
    items = TodoItem.objects.filter(workflow=workflow)
    if node_id is not None:
        items = items.filter(node_id=node_id)
    deleted, _ = items.delete()
    return deleted


def _item_id(arguments: dict) -> int:
    value = arguments.get("item_id")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _ToolError("invalid_arguments", "`item_id` (an integer from `list`) is required.")
    return value


def _get_item(workflow: Workflow, node_id: str, arguments: dict) -> TodoItem:
    item = todo_item_for_update(workflow=workflow, node_id=node_id, item_id=_item_id(arguments))
    if item is None:
        raise _ToolError("unknown_item", "No todo item with that id; call list to see the current items.")
    return item


def _add(workflow: Workflow, node_id: str, arguments: dict) -> dict:
    text = arguments.get("text")
    if not isinstance(text, str) or not text.strip():
        raise _ToolError("invalid_arguments", "`text` (a non-empty string) is required for add.")
    text = text.strip()
    limit = settings.WORKFLOW_TODOS_TEXT_MAX_CHARS
    if len(text) > limit:
        raise _ToolError("text_too_long", f"`text` is {len(text)} characters; at most {limit}. Shorten it.")
    # Two concurrent adds to one list must not both pass the item cap or take the same order, so they queue on a
    # transaction-scoped advisory lock of the list. Not on the workflow row: an agent's tool call runs under its
    # firing's row lock, and the workflow row comes before firing rows in the lock order (a Reset holding the
    # workflow and waiting for the firing would deadlock with it).
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"todos:{workflow.pk}:{node_id}"])
    items = TodoItem.objects.filter(workflow=workflow, node_id=node_id)
    if items.count() >= settings.WORKFLOW_TODOS_MAX_ITEMS:
        raise _ToolError(
            "too_many_items", f"The list holds at most {settings.WORKFLOW_TODOS_MAX_ITEMS} items; remove some first."
        )
    order = (items.aggregate(top=Max("order"))["top"] or 0) + 1
    item = TodoItem.objects.create(workflow=workflow, node_id=node_id, text=text, order=order)
    return {"item": _item_dict(item)}


def _complete(workflow: Workflow, node_id: str, arguments: dict) -> dict:
    done = arguments.get("done", True)
    if not isinstance(done, bool):
        raise _ToolError("invalid_arguments", "`done` must be true or false.")
    item = _get_item(workflow, node_id, arguments)
    if item.done != done:
        item.done = done
        item.save(update_fields=["done", "updated_at"])
    return {"item": _item_dict(item)}


def _remove(workflow: Workflow, node_id: str, arguments: dict) -> dict:
    item = _get_item(workflow, node_id, arguments)
    removed = _item_dict(item)
    item.delete()
    return {"removed": removed}


def todos_tool(*, workflow: Workflow, node_id: str, arguments: Any) -> dict:
    """Run one `todos` call. Returns `{"ok": True, ...}` or `{"ok": False, "error": {"code", "message"}}`."""
    try:
        if not isinstance(arguments, dict):
            raise _ToolError("invalid_arguments", "Arguments must be a JSON object with an `operation`.")
        operation = arguments.get("operation")
        if operation not in OPERATIONS:
            raise _ToolError("unknown_operation", f"`operation` must be one of {', '.join(OPERATIONS)}.")
        unknown = sorted(set(arguments) - {"operation", "text", "item_id", "done"})
        if unknown:
            raise _ToolError("invalid_arguments", f"Unknown arguments: {', '.join(map(str, unknown))}.")
        if operation == "list":
            return {"ok": True, "items": todos_list(workflow=workflow, node_id=node_id)}
        with transaction.atomic():
            result = {"add": _add, "complete": _complete, "remove": _remove}[operation](workflow, node_id, arguments)
            result["items"] = todos_list(workflow=workflow, node_id=node_id)
        return {"ok": True, **result}
    except _ToolError as error:
        return {"ok": False, "error": {"code": error.code, "message": error.message}}
