"""The events workflows sends on a workflow's socket, one typed constructor each (metadata only).

Services publish them with `core.realtime.publish_workflow_event` (on commit); tests compare what an
action sent with what these build (`capture_events`).
"""

from __future__ import annotations


def workflow_updated_event(*, workflow_id: int, revision: int) -> dict:
    """The saved graph (or the name) changed: open editors compare `revision` with theirs."""
    return {"type": "workflow.updated", "workflow_id": workflow_id, "revision": revision}


def workflow_generation_event(*, workflow_id: int, generation: int, state: str) -> dict:
    """A generation was admitted (Start) or ended (Stop): its number and new state."""
    return {"type": "workflow.generation", "workflow_id": workflow_id, "generation": generation, "state": state}


def workflow_reset_event(*, workflow_id: int, generation: int, previous: int) -> dict:
    """Workflow Reset admitted generation `generation` in place of `previous`."""
    return {"type": "workflow.reset", "workflow_id": workflow_id, "generation": generation, "previous": previous}
