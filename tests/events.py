"""`capture_events`: what an action sends on commit, checked where it is made (Zulip's `verify_action` idea).

Every event leaves a process through two functions, both called at commit time (or at once for streamed deltas):
`core.realtime.send_workflow_event_now` and `chat.run_stream.send_run_event_now`. The fixture replaces them where
`chat.events` looks them up, so a test sees exactly the events an action handed over — none for a rolled-back
change or an idempotent replay — and compares them with what the app's typed constructors (`<app>/events.py`)
build. Nothing reaches a socket while capturing; a few socket tests (`tests/realtime.py`) keep the transport
honest, and they alone see the streamed text deltas, which are batched straight into the sender as they arrive.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SentEvent:
    workflow_id: int
    event: dict
    run_id: int | None = None  # run events: the seq is taken when they go out, so it is not part of `event`

    @property
    def type(self) -> str:
        return self.event.get("type", "")


class EventCapture:
    def __init__(self, monkeypatch):
        self.sent: list[SentEvent] = []

        def workflow_event(*, workflow_id: int, event: dict) -> None:
            self.sent.append(SentEvent(workflow_id, dict(event)))

        def run_event(
            *, workflow_id: int, run_id: int, event: dict, append_text: str | None = None, wait: bool = False
        ) -> None:
            self.sent.append(SentEvent(workflow_id, dict(event), run_id=run_id))

        monkeypatch.setattr("core.realtime.send_workflow_event_now", workflow_event)
        monkeypatch.setattr("chat.events.send_workflow_event_now", workflow_event)
        monkeypatch.setattr("chat.events.send_run_event_now", run_event)

    def types(self) -> list[str]:
        return [sent.type for sent in self.sent]

    def events(self, event_type: str | None = None) -> list[dict]:
        """The events sent (of `event_type`), without the fields added when they go out (`hub_epoch`)."""
        return [
            {k: v for k, v in sent.event.items() if k != "hub_epoch"}
            for sent in self.sent
            if event_type is None or sent.type == event_type
        ]

    def clear(self) -> None:
        self.sent.clear()
