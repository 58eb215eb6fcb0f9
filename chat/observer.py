"""How the chat learns about the firings its runs started (agents/observers.py calls these).

The observer only hands each report to a chat service (`chat/services/run_progress.py`); the one thing it keeps
itself is the per-process text batcher of the answer being streamed, which writes nothing to the database.
"""

from __future__ import annotations

import threading

from django.db import transaction

from agents.observers import FiringObserver, PrepareContribution
from chat.delta_batcher import DeltaBatcher
from chat.services.run_progress import (
    chat_run_approval_record,
    chat_run_ended,
    chat_run_prepared,
    chat_run_step_record,
)


class ChatObserver(FiringObserver):
    def __init__(self) -> None:
        self._batchers: dict[str, DeltaBatcher] = {}
        self._lock = threading.Lock()

    def prepared(self, *, firing, stored_messages: list[dict]) -> PrepareContribution:
        return chat_run_prepared(firing=firing, stored_messages=stored_messages)

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

    # --- tool steps and the end ---------------------------------------------------------------------------

    def tool_step(self, *, firing, tool_call: dict, phase: str, result: dict | None = None) -> None:
        chat_run_step_record(firing=firing, tool_call=tool_call, phase=phase, result=result)

    def approval(self, *, firing, approval) -> None:
        chat_run_approval_record(firing=firing, approval=approval)

    def ended(self, *, firing) -> None:
        if firing.parent_id is not None:
            return
        self._drop_batcher(firing)
        # A savepoint: the runtime logs a failed hook and goes on, so a failure here must not break its transaction.
        with transaction.atomic():
            chat_run_ended(firing=firing)


chat_observer = ChatObserver()
