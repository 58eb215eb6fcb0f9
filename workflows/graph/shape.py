"""`graph_shape_errors`: is a graph from outside shaped like a graph at all? Checked before anything is saved.

The normalizer never raises on a JSON object and quietly drops what it cannot read, which is right for a stored
row being upgraded but wrong for a client's edit: `nodes: "x"` would normalize to an empty graph and replace the
owner's work. So every write path (create, update, import, validate) refuses a wrongly typed document whole, with
one message per field path, and keeps warnings only for the normalizations docs/workflows.md#normalize allows
(canonical ids and their
aliases, the legacy memory rewrite, unknown extra fields dropped). `GRAPH_JSON_SCHEMA` publishes the same rules in
the OpenAPI schema, so the documented contract and the behaviour agree.
"""

from __future__ import annotations

import math
from typing import Any

_ID = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
_HANDLE = {"type": "string", "nullable": True}

GRAPH_JSON_SCHEMA: dict = {
    "type": "object",
    "description": "A workflow graph; normalized by the server (canonical ids come back in `aliases`). A wrongly "
    "typed field anywhere answers 400 `invalid_request` with `errors.graph` keyed by the field path "
    "(`nodes[0].type`), and nothing is saved. Unknown extra node fields are dropped with a `DROPPED_FIELDS` warning.",
    "properties": {
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": _ID,
                    "type": {"type": "string", "minLength": 1},
                    "params": {"type": "object", "nullable": True},
                    "position": {
                        "type": "object",
                        "nullable": True,
                        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                        "required": ["x", "y"],
                    },
                },
                "required": ["type"],
            },
        },
        "edges": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "source": _ID,
                    "sourceHandle": _HANDLE,
                    "target": _ID,
                    "targetHandle": _HANDLE,
                },
                "required": ["source", "target"],
            },
        },
    },
    "required": ["nodes", "edges"],
}


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _node_errors(path: str, node: Any, errors: dict[str, list[str]]) -> None:
    if not isinstance(node, dict):
        errors[path] = ["A node is an object `{id, type, params, position?}`."]
        return
    if "id" in node and not _is_id(node["id"]):
        errors[f"{path}.id"] = ["A node id is a string (or an integer)."]
    if not isinstance(node.get("type"), str) or not node.get("type"):
        errors[f"{path}.type"] = ["A node needs a `type` string."]
    if node.get("params") is not None and not isinstance(node["params"], dict):
        errors[f"{path}.params"] = ["`params` is an object."]
    position = node.get("position")
    if position is not None and not (
        isinstance(position, dict) and _is_number(position.get("x")) and _is_number(position.get("y"))
    ):
        errors[f"{path}.position"] = ["`position` is an object with numeric `x` and `y`."]


def _edge_errors(path: str, edge: Any, errors: dict[str, list[str]]) -> None:
    if not isinstance(edge, dict):
        errors[path] = ["An edge is an object `{source, sourceHandle, target, targetHandle}`."]
        return
    for end in ("source", "target"):
        if not _is_id(edge.get(end)):
            errors[f"{path}.{end}"] = [f"An edge needs a `{end}` node id."]
    for handle in ("sourceHandle", "targetHandle"):
        if edge.get(handle) is not None and not isinstance(edge[handle], str):
            errors[f"{path}.{handle}"] = [f"`{handle}` is a string or null."]
    if "id" in edge and not isinstance(edge["id"], str):
        errors[f"{path}.id"] = ["An edge id is a string."]


def graph_shape_errors(graph: Any) -> dict[str, list[str]]:
    """{field path: [messages]} for every wrongly shaped part of `graph`; empty when it is shaped like a graph."""
    if not isinstance(graph, dict):
        return {"": ["A graph is a JSON object with `nodes` and `edges` lists."]}
    errors: dict[str, list[str]] = {}
    for key, check in (("nodes", _node_errors), ("edges", _edge_errors)):
        items = graph.get(key)
        if key not in graph:
            errors[key] = [f"`{key}` is required (a list, possibly empty)."]
        elif not isinstance(items, list):
            errors[key] = [f"`{key}` is a list."]
        else:
            for position, item in enumerate(items):
                check(f"{key}[{position}]", item, errors)
    return errors


def graph_nul_path(graph: Any) -> str | None:
    """The path of the first string (or key) holding a NUL character, which PostgreSQL's jsonb cannot store; a graph
    that passes the schema but holds one is refused as `invalid_graph` rather than failing at the database."""
    stack: list[tuple[Any, str]] = [(graph, "graph")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return path
        elif isinstance(value, dict):
            for key, child in value.items():
                if isinstance(key, str) and "\x00" in key:
                    return path
                stack.append((child, f"{path}.{key}"))
        elif isinstance(value, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(value))
    return None
