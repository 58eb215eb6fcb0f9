"""Asking a teammate: the rules every delegation follows, and a teammate asked from inside an agent runtime's run.

A native agent's teammate call parks the firing (`waiting`) and the child's end brings the parent's persist back
(steps.py). An agent runtime (Claude Code, Vertex, RLM) cannot be parked: its run waits for the tool's answer, on a
thread of its own. There the teammate's firing runs to its end in that thread (`dispatch.steps_in_this_thread`),
with the same rules, the same child row (parent, tool call id, delegation chain, chat run) and the same Stop: a
stop of the lead reaches the child through its parent link.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connections

from agents.dispatch import steps_in_this_thread
from agents.models import Firing
from agents.services.firings import firing_start
from agents.tools import ToolOutcome


def delegation_refusal(firing: Firing, binding: dict, task) -> ToolOutcome | None:
    """Why `firing` may not give `task` to the teammate of `binding` (an error the model reads), or None."""
    if not isinstance(task, str) or not task.strip():
        return ToolOutcome("Error: give your teammate a `task` (a non-empty string).", is_error=True)
    if len(task) > settings.AGENT_MAX_PROMPT_CHARS:
        # firing_start would refuse it; refused inside persist it would roll the whole turn back, every retry alike.
        return ToolOutcome(
            f"Error: the task is {len(task):,} characters; a teammate takes at most "
            f"{settings.AGENT_MAX_PROMPT_CHARS:,}. Shorten it (say what to do, not everything you know).",
            is_error=True,
        )
    if binding["node_id"] in firing.delegation_chain:
        return ToolOutcome(
            f"Error: `{binding['name']}` is already working on this request further up the chain; delegating to it "
            "again would be a cycle. Answer with what you have.",
            is_error=True,
        )
    if firing.depth + 1 > settings.AGENT_MAX_DELEGATION_DEPTH:
        return ToolOutcome(
            f"Error: delegation is limited to {settings.AGENT_MAX_DELEGATION_DEPTH} levels. Do this part yourself.",
            is_error=True,
        )
    return None


def teammate_outcome(child: Firing) -> ToolOutcome:
    """What the lead reads from its teammate's ended firing (a teammate's answer is never cut)."""
    if child.state == Firing.State.FINISHED:
        return ToolOutcome(child.final_text or "(the teammate gave no answer)")
    return ToolOutcome(
        f"Error: your teammate could not finish ({child.error_code or child.end_reason}).", is_error=True
    )


def teammate_call_in_thread(*, firing: Firing, binding: dict, arguments: dict, call_id: str) -> tuple[str, bool]:
    """An agent runtime's call of a teammate: the child firing runs to its end in this thread; (answer, is_error).

    Idempotent on the call id: a call the runtime repeats reads the child that call already made."""
    try:
        child = Firing.objects.filter(parent=firing, parent_tool_call_id=call_id).first()
        if child is None:
            task = arguments.get("task") if isinstance(arguments, dict) else None
            refusal = delegation_refusal(firing, binding, task)
            if refusal is not None:
                return refusal.content, True
            with steps_in_this_thread():
                child_id = firing_start(
                    workflow=firing.workflow,
                    generation=firing.generation,
                    agent_node_id=binding["node_id"],
                    prompt=task,
                    chat_run=firing.chat_run_id,
                    parent=firing,
                    parent_tool_call_id=call_id,
                )
            child = Firing.objects.get(pk=child_id)
        if not child.is_terminal:
            # Only when its steps were handed elsewhere (a worker shutting down): the lead's run cannot wait for it.
            return "Error: your teammate could not finish in time (it was interrupted).", True
        outcome = teammate_outcome(child)
        return outcome.content, outcome.is_error
    finally:
        connections.close_all()  # this thread's own connection (the runtime's tool thread)
