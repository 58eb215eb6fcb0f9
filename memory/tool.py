"""The `memory` tool the model sees: one JSON Schema and a dispatcher to the services and selectors.

The namespace (owner, workflow, memory node) comes from the runtime, never from the arguments: the schema has no
namespace fields and the dispatcher refuses any argument it does not know. Every failure comes back as
{"error": {"code", "message", "hint"}} for the runtime to hand the model as an error tool result.
"""

from __future__ import annotations

import json
import logging

from django.conf import settings

from core.errors import ServiceError

from . import selectors, services

logger = logging.getLogger(__name__)

MEMORY_TOOL_NAME = "memory"

OPERATIONS = ("remember", "recall", "list", "get", "update", "forget")

# Which arguments each operation takes (required first); anything else is refused so mistakes are visible.
_ARGUMENTS = {
    "remember": ({"content"}, {"title", "category", "tags", "expires_at"}),
    "recall": ({"query"}, {"categories", "tags", "limit", "cursor"}),
    "list": (set(), {"categories", "tags", "limit", "cursor"}),
    "get": ({"memory_id"}, set()),
    "update": ({"memory_id", "expected_version", "patch"}, set()),
    "forget": ({"memory_id", "expected_version"}, set()),
}


def memory_tool_definition() -> dict:
    content_bytes = settings.MEMORY_CONTENT_MAX_BYTES
    limit_max = settings.MEMORY_LIMIT_MAX
    tag = {"type": "string", "maxLength": settings.MEMORY_TAG_MAX_CHARS}
    tags = {"type": "array", "items": tag, "maxItems": settings.MEMORY_TAGS_MAX}
    expires = {
        "type": ["string", "null"],
        "description": "ISO 8601 date-time after which the memory is gone, e.g. 2027-01-31T00:00:00Z. Omit to keep it.",
    }
    return {
        "name": MEMORY_TOOL_NAME,
        "description": (
            "Your durable memory for this workflow: facts, decisions and preferences worth keeping across "
            "conversations. Nothing is recalled for you automatically: call `recall` (search) or `list` when past "
            "knowledge could help, and `remember` when you learn something lasting (one fact per memory, written "
            "so it makes sense on its own). To change or delete a memory, pass the `version` you last read as "
            "`expected_version`; if it changed meanwhile you get a version_conflict with the current version. "
            "Do not store secrets or whole conversations."
        ),
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "required": ["operation"],
            "properties": {
                "operation": {
                    "type": "string",
                    "enum": list(OPERATIONS),
                    "description": (
                        "remember(content, title?, category?, tags?, expires_at?) | "
                        "recall(query, categories?, tags?, limit?, cursor?) | "
                        "list(categories?, tags?, limit?, cursor?) | get(memory_id) | "
                        "update(memory_id, expected_version, patch) | "
                        "forget(memory_id, expected_version)"
                    ),
                },
                "content": {
                    "type": "string",
                    "description": f"remember: the fact itself, self-contained (at most {content_bytes} bytes).",
                },
                "title": {
                    "type": "string",
                    "maxLength": settings.MEMORY_TITLE_MAX_CHARS,
                    "description": "remember: a short headline.",
                },
                "category": {
                    "type": "string",
                    "maxLength": settings.MEMORY_CATEGORY_MAX_CHARS,
                    "description": "remember: one word that groups memories, e.g. preference, decision, fact, person.",
                },
                "tags": {**tags, "description": "remember: labels; recall/list: keep items with any of these tags."},
                "expires_at": expires,
                "query": {"type": "string", "description": "recall: what you are looking for, in plain words."},
                "categories": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "recall/list: keep items in any of these categories.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": limit_max,
                    "description": f"recall/list: items per page (default {settings.MEMORY_LIMIT_DEFAULT}).",
                },
                "cursor": {"type": "string", "description": "recall/list: next_cursor from the previous page."},
                "memory_id": {"type": "integer", "description": "get/update/forget: the memory's id."},
                "expected_version": {
                    "type": "integer",
                    "description": "update/forget: the version you last read; stale versions are refused.",
                },
                "patch": {
                    "type": "object",
                    "additionalProperties": False,
                    "description": "update: only the fields to change (expires_at null removes the expiry).",
                    "properties": {
                        "content": {"type": "string"},
                        "title": {"type": "string"},
                        "category": {"type": "string"},
                        "tags": tags,
                        "expires_at": expires,
                    },
                },
            },
        },
    }


def _error(code: str, message: str, hint: str, **extra) -> dict:
    return {"error": {"code": code, "message": message, "hint": hint, **extra}}


def _parse(arguments) -> tuple[str, dict]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            raise ServiceError(
                "invalid_arguments", "The arguments are not valid JSON.", extra={"hint": "Send one JSON object."}
            ) from None
    if not isinstance(arguments, dict):
        raise ServiceError(
            "invalid_arguments",
            "The arguments must be a JSON object.",
            extra={"hint": 'Send an object like {"operation": "recall", "query": "..."}.'},
        )
    operation = arguments.get("operation")
    if operation not in OPERATIONS:
        raise ServiceError(
            "invalid_arguments",
            f"Unknown operation {operation!r}.",
            extra={"hint": f"Use one of: {', '.join(OPERATIONS)}."},
        )
    required, optional = _ARGUMENTS[operation]
    given = {key: value for key, value in arguments.items() if key != "operation" and value is not None}
    unknown = sorted(set(given) - required - optional)
    if unknown:
        raise ServiceError(
            "invalid_arguments",
            f"{operation} does not take: {', '.join(unknown)}.",
            extra={
                "hint": f"{operation} takes: {', '.join(sorted(required | optional)) or 'no other arguments'}. "
                "The memory's scope is fixed by the workflow and cannot be chosen."
            },
        )
    missing = sorted(required - set(given))
    if missing:
        raise ServiceError(
            "invalid_arguments",
            f"{operation} needs: {', '.join(missing)}.",
            extra={"hint": "Add the missing arguments and call again."},
        )
    return operation, given


def memory_tool_step_summary(result) -> str | None:
    """What the owner reads under an answer for one `memory` call: the item saved or read, what a recall found, or
    what was forgotten (the chat clips it). None for a result of another shape (a refusal is the chat's to say)."""
    if not isinstance(result, dict):
        return None
    if isinstance(result.get("item"), dict):
        item = result["item"]
        return f"Memory #{item.get('id')}, version {item.get('version')}: {item.get('content') or ''}"
    if isinstance(result.get("items"), list):
        count = len(result["items"])
        return "Nothing found." if not count else f"Found {count} memor{'y' if count == 1 else 'ies'}."
    if isinstance(result.get("forgotten"), dict):
        return f"Forgot memory #{result['forgotten'].get('id')}."
    return None


def memory_tool_call(
    *, owner, workflow, node_id: str, arguments: dict, idempotency_key: str, actor: str, provenance=None
) -> dict:
    """Run one `memory` tool call in the namespace (owner, workflow, node_id). Never raises."""
    try:
        operation, args = _parse(arguments)
        namespace = services.memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=node_id)
        if operation == "remember":
            return services.memory_item_remember(
                namespace=namespace, actor=actor, idempotency_key=idempotency_key, provenance=provenance, **args
            )
        if operation == "recall":
            return selectors.memory_items_recall(namespace=namespace, **args)
        if operation == "list":
            return selectors.memory_items_list(namespace=namespace, **args)
        if operation == "get":
            return selectors.memory_item_get(namespace=namespace, item_id=args["memory_id"])
        if operation == "update":
            return services.memory_item_update(
                namespace=namespace,
                item_id=args["memory_id"],
                expected_version=args["expected_version"],
                patch=args["patch"],
                actor=actor,
                idempotency_key=idempotency_key,
                provenance=provenance,
            )
        return services.memory_item_forget(
            namespace=namespace,
            item_id=args["memory_id"],
            expected_version=args["expected_version"],
            actor=actor,
            idempotency_key=idempotency_key,
            provenance=provenance,
        )
    except ServiceError as exc:
        extra = {k: v for k, v in exc.extra.items() if k != "hint"}
        return _error(exc.code, exc.message, exc.extra.get("hint", "Check the arguments and try again."), **extra)
    except Exception:
        logger.exception("memory tool failed", extra={"workflow_id": getattr(workflow, "pk", None)})
        return _error(
            "internal_error",
            "Memory failed unexpectedly.",
            "Try the call once more; if it fails again, continue without memory.",
        )
