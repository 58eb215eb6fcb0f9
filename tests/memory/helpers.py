"""Helpers of the memory tests: the memory nodes of the `workflow` fixture's graph."""

from __future__ import annotations

NODE = "1:simpleMemory:1"
OTHER_NODE = "1:simpleMemory:2"


def memory_graph(*node_ids):
    return {"nodes": [{"id": node_id, "type": "simpleMemory", "params": {}} for node_id in node_ids], "edges": []}
