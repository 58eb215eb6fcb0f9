"""Writes to workflows: create, save, import, delete, start, stop, reset, add a teammate, clear context/memory.
Import from here, not from submodules.

Every graph that enters storage goes through `prepare_graph` (normalize, then validate). Lock order: the workflow
row first (`workflows.locks.workflow_for_update`), then anything keyed by it. Reset and clear name no node type and
no other app: they go through NodeSpec hooks and the listener registries (workflows/listeners.py).
"""

from .clearing import workflow_context_clear, workflow_memory_clear
from .copies import workflow_create_from_starter, workflow_demo_ensure, workflow_duplicate, workflow_import
from .generations import live_generation_of, workflow_start, workflow_stop
from .prepare import EMPTY_GRAPH, GraphOutcome, prepare_graph, used_numbers
from .reset import ResetOutcome, workflow_reset
from .storage import workflow_create, workflow_delete, workflow_load, workflow_rename, workflow_save
from .subagents import workflow_add_subagent

__all__ = [
    "EMPTY_GRAPH",
    "GraphOutcome",
    "ResetOutcome",
    "live_generation_of",
    "prepare_graph",
    "used_numbers",
    "workflow_add_subagent",
    "workflow_context_clear",
    "workflow_create",
    "workflow_create_from_starter",
    "workflow_delete",
    "workflow_demo_ensure",
    "workflow_duplicate",
    "workflow_import",
    "workflow_load",
    "workflow_memory_clear",
    "workflow_rename",
    "workflow_reset",
    "workflow_save",
    "workflow_start",
    "workflow_stop",
]
