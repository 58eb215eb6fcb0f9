"""What the chat (or any other surface) learns about the firings it started.

The runtime knows no surface by name: the chat app registers one observer in its
AppConfig.ready(). Observers are called only for firings that carry a `chat_run_id`: the
run's answering firing (`parent_id is None`) and the teammates it delegated to (same
`chat_run_id`, `parent_id` set), so a run can record every agent's cursor. A failing
observer is logged, never allowed to fail the firing (except `prepared`, whose failure
fails the firing: a note claimed wrongly must not be lost).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrepareContribution:
    system_suffix: str = ""  # appended to the system prompt (a fixed, byte-stable guide)
    user_prefix: str = ""  # bracketed notes put ahead of the user's message
    # Blocks after the user's text: the `file` blocks of what the owner attached (references, never bytes).
    user_blocks: tuple[dict, ...] = ()


class FiringObserver:
    def prepared(self, *, firing, stored_messages: list[dict]) -> PrepareContribution:
        """Inside prepare's transaction: record the run's cursor, claim notes."""
        return PrepareContribution()

    def stream_event(self, *, firing, event: dict) -> None:
        """A provider stream event (text deltas, tool call starts). Called outside transactions."""

    def tool_step(self, *, firing, tool_call: dict, phase: str, result: dict | None = None) -> None:
        """A tool call `started` or `finished`; inside persist's transaction (send on commit)."""

    def approval(self, *, firing, approval) -> None:
        """A tool call asks the owner first (`approval` pending) or was decided; inside the transaction that recorded
        it (send on commit)."""

    def ended(self, *, firing) -> None:
        """The firing reached a terminal state; inside the transaction that ended it."""


_observers: list[FiringObserver] = []


def register_firing_observer(observer: FiringObserver) -> None:
    if observer not in _observers:
        _observers.append(observer)


def notify_prepared(*, firing, stored_messages: list[dict]) -> PrepareContribution:
    suffix, prefix, blocks = [], [], []
    for observer in list(_observers):
        contribution = observer.prepared(firing=firing, stored_messages=stored_messages)
        if contribution.system_suffix:
            suffix.append(contribution.system_suffix)
        if contribution.user_prefix:
            prefix.append(contribution.user_prefix)
        blocks.extend(contribution.user_blocks)
    return PrepareContribution(system_suffix="".join(suffix), user_prefix="".join(prefix), user_blocks=tuple(blocks))


def _each(method: str, **kwargs) -> None:
    for observer in list(_observers):
        try:
            getattr(observer, method)(**kwargs)
        except Exception:
            logger.exception("firing observer failed", extra={"method": method})


def notify_stream_event(*, firing, event: dict) -> None:
    _each("stream_event", firing=firing, event=event)


def notify_tool_step(*, firing, tool_call: dict, phase: str, result: dict | None = None) -> None:
    _each("tool_step", firing=firing, tool_call=tool_call, phase=phase, result=result)


def notify_approval(*, firing, approval) -> None:
    _each("approval", firing=firing, approval=approval)


def notify_ended(*, firing) -> None:
    _each("ended", firing=firing)
