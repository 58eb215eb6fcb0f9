"""How the chat learns about the firings its runs started (agents/observers.py calls these)."""

from __future__ import annotations

import threading

from django.db import transaction
from django.utils import timezone

from agents.observers import FiringObserver, PrepareContribution
from chat.events import DeltaBatcher, publish_run_event
from chat.models import ChatRun, ChatRunStep
from chat.services.notes import NOTES_GUIDE, claim_notes
from chat.services.runs import finish_run_from_firing
from chat.services.thread import chat_compaction_seen

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
    from agents.models import ToolCallResult

    content = (
        ToolCallResult.objects.filter(firing_id=firing.pk, tool_call_id=tool_call_id)
        .order_by("-id")
        .values_list("content", flat=True)
        .first()
    )
    content = content or ""
    return content if len(content) <= STEP_RESULT_CHARS else content[:STEP_RESULT_CHARS] + "…"


class ChatObserver(FiringObserver):
    def __init__(self) -> None:
        self._batchers: dict[str, DeltaBatcher] = {}
        self._lock = threading.Lock()

    # --- prepare: the cursor, the notes, the guide --------------------------------------------------------

    def prepared(self, *, firing, stored_messages: list[dict]) -> PrepareContribution:
        from conversations.store import conversation_cursor

        run = ChatRun.objects.select_for_update().filter(pk=firing.chat_run_id).first()
        if run is None:
            return PrepareContribution()
        cursors = dict(run.context_cursors or {})
        changed = []
        if firing.agent_node_id not in cursors:  # the first preparation in a run wins
            # The cursor is of the list as stored: results the load added for calls left open are not stored, and
            # a rewind compares against the stored rows.
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
            prefix = claim_notes(run=run)
            chat_compaction_seen(run=run, stored_messages=stored_messages)
            if run.state in (ChatRun.State.PENDING, ChatRun.State.QUEUED):
                run.state = ChatRun.State.RUNNING
                run.started_at = timezone.now()
                changed += ["state", "started_at"]
        if changed:
            run.save(update_fields=[*changed, "updated_at"])
        return PrepareContribution(system_suffix=NOTES_GUIDE, user_prefix=prefix)

    # --- streaming ----------------------------------------------------------------------------------------

    def _batcher(self, firing) -> DeltaBatcher:
        key = str(firing.pk)
        with self._lock:
            batcher = self._batchers.get(key)
            if batcher is None:
                batcher = self._batchers[key] = DeltaBatcher(
                    workflow_id=firing.workflow_id, run_id=int(firing.chat_run_id)
                )
                # A firing usually ends in another worker process, so this one never hears of it: keep the
                # newest few (dicts keep insertion order) instead of one entry per answer ever streamed.
                while len(self._batchers) > 256:
                    self._batchers.pop(next(iter(self._batchers)))
            return batcher

    def _drop_batcher(self, firing) -> None:
        with self._lock:
            batcher = self._batchers.pop(str(firing.pk), None)
        if batcher is not None:
            batcher.flush()

    def stream_event(self, *, firing, event: dict) -> None:
        if event.get("type") == "runtime_step" and isinstance(event.get("tool_call"), dict):
            # An agent runtime's own tool call or REPL cell (RLM), with its result when it finished: shown as a step
            # like the firing's tool calls (a teammate's too); its result is the one observed, there is no
            # ToolCallResult for it.
            phase = event.get("phase") or "started"
            self.tool_step(firing=firing, tool_call=event["tool_call"], phase=phase, result=event.get("result"))
            return
        if firing.parent_id is not None:
            return  # a teammate's text is its answer to the lead, not to the owner
        if event.get("type") == "text_delta":
            self._batcher(firing).add(event.get("text") or "")

    # --- tool steps ---------------------------------------------------------------------------------------

    def tool_step(self, *, firing, tool_call: dict, phase: str, result: dict | None = None) -> None:
        run_id = int(firing.chat_run_id)
        if not ChatRun.objects.filter(pk=run_id).exists():
            return  # a firing that names a run the chat does not have (cleared meanwhile): nothing to show
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
            observed = (result or {}).get("content")
            if isinstance(observed, str):
                step.result = observed if len(observed) <= STEP_RESULT_CHARS else observed[:STEP_RESULT_CHARS] + "…"
            else:
                step.result = _step_result(firing, step.tool_call_id)
            step.finished_at = timezone.now()
            step.save(update_fields=["state", "is_error", "result", "finished_at"])
        publish_run_event(
            workflow_id=firing.workflow_id,
            run_id=run_id,
            event={
                "type": "run.step",
                "workflow_id": firing.workflow_id,
                "step_id": step.pk,
                "phase": phase,
                "name": step.name,
                "agent_node_id": firing.agent_node_id,
                "is_error": step.is_error,
            },
        )

    # --- the end ------------------------------------------------------------------------------------------

    def ended(self, *, firing) -> None:
        if firing.parent_id is not None:
            return
        self._drop_batcher(firing)
        run = ChatRun.objects.select_for_update().filter(pk=firing.chat_run_id).first()
        if run is None or not run.is_active or (run.firing_id and run.firing_id != firing.pk):
            return
        with transaction.atomic():
            finish_run_from_firing(run, firing)


chat_observer = ChatObserver()
