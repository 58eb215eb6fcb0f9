"""How the runtime takes part in a Workflow Reset."""

from __future__ import annotations

from agents.services.firings import firings_end_on_reset


def end_firings_on_reset(*, workflow, previous_generation, new_generation, actor=None) -> int:
    """End every live firing of the workflow with code `reset` (inside the reset transaction)."""
    return firings_end_on_reset(workflow_id=workflow.pk)
