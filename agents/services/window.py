"""Whether a firing's next request fits its model's window (docs/invariants.md#compaction): the stored list, the
new message and the room the answer needs. Checked before a firing's first step, where a conversation that grew
while its compaction was still running would otherwise be sent whole."""

from __future__ import annotations

from dataclasses import dataclass

from agents.models import Firing
from conversations.store import latest_turn_start
from providers import capabilities
from providers.context import estimate_tokens, output_headroom
from providers.token_estimate import CHARS_PER_TOKEN

from .provider_request import provider_request_of


@dataclass(frozen=True)
class WindowFit:
    projected: int  # input tokens of the request plus the answer's headroom
    window: int
    minimal: int  # the same for the smallest list compaction can make: system, the latest turn, the new message

    @property
    def fits(self) -> bool:
        return not self.window or self.projected <= self.window

    @property
    def fits_compacted(self) -> bool:
        return not self.window or self.minimal <= self.window


def answer_headroom(firing: Firing, request) -> int:
    """The room kept for the answer: what the request allows for output, at most the share of the window above the
    compaction threshold (the threshold is what leaves room for the answer; asking for more would make every turn
    past a fraction of the window wait for a compaction that was not due yet)."""
    window = capabilities(request.provider, request.model).context_window
    threshold = float(firing.agent_config["compaction_threshold"])
    return min(output_headroom(request), max(int(window * (1 - threshold)), 0))


# How far the estimate of a stored list can exceed its stored size over ~4 bytes a token: the estimate serializes
# with spaces after separators and escapes non-ASCII text (\uXXXX: six characters for two or three UTF-8 bytes).
_STORED_BYTES_BOUND = 3


def window_fit(firing: Firing, messages: list[dict], *, stored_count: int = 0, stored_bytes: int | None = None):
    """How `messages` (a firing's whole next request: stored list and the new message) sits in the window. An
    estimate (no provider call: this runs under the firing's lock). `stored_bytes`: the stored size of
    `messages[:stored_count]` (the header knows it): when even a generous bound from it fits, the request fits and
    the conversation is not serialized again to say so (a big-window model's every turn); only a request near the
    window is estimated message by message, and the smallest list compaction can make only when it does not fit."""
    rest = messages[stored_count:] if stored_bytes is not None else messages
    request = provider_request_of(firing, rest, credentials=False)
    window = capabilities(request.provider, request.model).context_window
    headroom = answer_headroom(firing, request)
    if not window:
        return WindowFit(0, window, 0)
    if stored_bytes is not None:
        bound = estimate_tokens(request) + headroom + _STORED_BYTES_BOUND * -(-stored_bytes // CHARS_PER_TOKEN)
        if bound <= window:
            return WindowFit(bound, window, bound)
        request = provider_request_of(firing, messages, credentials=False)
    projected = estimate_tokens(request) + headroom
    if projected <= window:
        return WindowFit(projected, window, projected)
    systems = 0
    while systems < len(messages) and messages[systems].get("role") == "system":
        systems += 1
    stored = messages[:-1]
    latest = max(latest_turn_start(stored), systems) if len(stored) > systems else len(stored)
    smallest = [*messages[:systems], *stored[latest:], messages[-1]]
    return WindowFit(
        projected, window, estimate_tokens(provider_request_of(firing, smallest, credentials=False)) + headroom
    )


def too_long_message(firing: Firing) -> str:
    return (
        "This message and the conversation's latest turn are too long for "
        f"{firing.agent_config.get('model', 'the model')}'s window."
    )
