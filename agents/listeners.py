"""How the runtime takes part in a Workflow Reset."""

from __future__ import annotations

from agents.locks import firings_live_for_update
from agents.models import Firing
from agents.services.firings import firing_end


def end_firings_on_reset(*, workflow, previous_generation, new_generation, actor=None) -> int:
    """End every live firing of the workflow with code `reset` (inside the reset transaction).

    A provider call in flight is told to stop; when it returns, persist finds the firing ended, bills the call
    and saves nothing, so no turn lands in the conversations the reset is clearing.
    """
    ended = 0
    for firing in firings_live_for_update(workflow_id=workflow.pk):
        firing.stop_requested = True
        firing.save(update_fields=["stop_requested", "updated_at"])
        firing_end(firing, state=Firing.State.FAILED, error_code="reset", error_message="The workflow was reset.")
        ended += 1
    return ended
