"""What the chat does when the runtime reports on a firing one of its runs started.

`chat/observer.py` hands each report here and does nothing else with the database: these services write the run,
its steps and its end, and send the run events on commit. They run inside the runtime's transaction, under the
firing's row lock, so they take the run and then the session (docs/architecture.md#lock-order, 2-5).
"""

from __future__ import annotations

from django.utils import timezone

from agents.observers import PrepareContribution
from agents.selectors import firing_outcome_of, tool_call_result_content
from chat.events import publish_run_event, run_approval_event, run_step_event
from chat.locks import chat_run_for_update, chat_run_with_message_for_update
from chat.models import ChatRun, ChatRunStep
from chat.selectors import step_label
from chat.services.attachments import message_file_blocks
from chat.services.markers import chat_compaction_seen
from chat.services.notes import NOTES_GUIDE, chat_notes_claim
from chat.services.runs import chat_run_finish_from_firing
from conversations.store import conversation_cursor
from workflows.nodes import get_node_spec

# What a step keeps of a tool's result for the owner's page (the runtime keeps the whole result for the agent).
STEP_RESULT_CHARS = 4000
STEP_ARGUMENTS_CHARS = 4000


def _step_arguments(tool_call: dict) -> dict:
    arguments = tool_call.get("arguments")
    if not isinstance(arguments, dict):
        raw = str(tool_call.get("arguments_raw") or "")
        return {"raw": raw[:STEP_ARGUMENTS_CHARS]} if raw else {}
    return arguments if len(str(arguments)) <= STEP_ARGUMENTS_CHARS else {"raw": str(arguments)[:STEP_ARGUMENTS_CHARS]}


def _step_result(firing, tool_call_id: str) -> str:
    content = tool_call_result_content(firing_id=firing.pk, tool_call_id=tool_call_id)
    return content if len(content) <= STEP_RESULT_CHARS else content[:STEP_RESULT_CHARS] + "…"


def chat_run_prepared(*, firing, stored_messages: list[dict]) -> PrepareContribution:
    """A firing of the run was prepared: record its agent's context cursor (the first preparation in a run wins;
    teammates included) and, for the answering firing, claim the untold notes (the user prefix), note a
    compaction, move the run to `running` and return the byte-stable notes guide as the system suffix."""
    run = chat_run_with_message_for_update(firing.chat_run_id)
    if run is None:
        return PrepareContribution()
    cursors = dict(run.context_cursors or {})
    changed = []
    if firing.agent_node_id not in cursors:
        # The cursor is of the list as stored: results the load added for calls left open are not stored, and a
        # rewind compares against the stored rows.
        as_stored = [m for m in stored_messages if not (m.get("meta") or {}).get("closed_on_load")]
        cursors[firing.agent_node_id] = {"generation": firing.generation, **conversation_cursor(as_stored)}
        run.context_cursors = cursors
        changed.append("context_cursors")
    if firing.parent_id is not None:
        if changed:
            run.save(update_fields=[*changed, "updated_at"])
        return PrepareContribution()
    prefix = ""
    if run.is_active:
        prefix = chat_notes_claim(run=run)
        chat_compaction_seen(run=run, stored_messages=stored_messages)
        if run.state in (ChatRun.State.PENDING, ChatRun.State.QUEUED):
            run.state = ChatRun.State.RUNNING
            run.started_at = timezone.now()
            changed += ["state", "started_at"]
    if changed:
        run.save(update_fields=[*changed, "updated_at"])
    return PrepareContribution(
        system_suffix=NOTES_GUIDE, user_prefix=prefix, user_blocks=message_file_blocks(run.user_message)
    )


def chat_run_step_record(*, firing, tool_call: dict, phase: str, result: dict | None = None) -> ChatRunStep | None:
    """A tool call of the run's firing started or finished: keep it as a `ChatRunStep` (once per call) and send
    `run.step` on commit. None when the run is gone (cleared meanwhile): nothing to show."""
    run_id = int(firing.chat_run_id)
    if not ChatRun.objects.filter(pk=run_id).exists():
        return None
    step, _ = ChatRunStep.objects.get_or_create(
        run_id=run_id,
        firing_id=firing.pk,
        tool_call_id=str(tool_call.get("id", "")),
        defaults={
            "agent_node_id": firing.agent_node_id,
            "name": str(tool_call.get("name", ""))[:200],
            "arguments": _step_arguments(tool_call),
        },
    )
    if phase == "finished" and step.state != ChatRunStep.State.FINISHED:
        step.state = ChatRunStep.State.FINISHED
        step.is_error = bool((result or {}).get("is_error"))
        observed = (result or {}).get("content")  # an agent runtime's own tool result comes with its report
        if isinstance(observed, str):
            step.result = observed if len(observed) <= STEP_RESULT_CHARS else observed[:STEP_RESULT_CHARS] + "…"
        else:
            step.result = _step_result(firing, step.tool_call_id)
        step.finished_at = timezone.now()
        step.save(update_fields=["state", "is_error", "result", "finished_at"])
    publish_run_event(
        workflow_id=firing.workflow_id,
        run_id=run_id,
        event=run_step_event(workflow_id=firing.workflow_id, step=step, phase=phase, label=_label(firing, step)),
    )
    return step


def _label(firing, step: ChatRunStep) -> str:
    """The step's line from the firing's binding of the tool (the one the call was made through)."""
    binding = next((b for b in firing.tool_bindings or [] if b.get("name") == step.name), None)
    if binding is None:
        return step.name
    return step_label(step, get_node_spec(binding.get("node_type")), binding.get("meta"))


def chat_run_approval_record(*, firing, approval) -> None:
    """A call of the run (a teammate's too) asks the owner first, or was decided: tell open pages on commit (ids and
    states only; the card comes with the snapshot)."""
    publish_run_event(
        workflow_id=firing.workflow_id,
        run_id=int(firing.chat_run_id),
        event=run_approval_event(workflow_id=firing.workflow_id, approval=approval),
    )


def chat_run_ended(*, firing) -> ChatRun | None:
    """The answering firing ended (inside the transaction that ended it): map its end onto the run. A teammate's
    end, a run already over, or a run now answered by another firing changes nothing."""
    if firing.parent_id is not None:
        return None
    run = chat_run_for_update(firing.chat_run_id)
    if run is None or not run.is_active or (run.firing_id and run.firing_id != firing.pk):
        return None
    return chat_run_finish_from_firing(run, firing_outcome_of(firing))
