"""What every adapter shares: event delivery, Stop polling, and the policies for what a stored wire cannot
express at a given provider. Policies only shape the outgoing request; the stored list is never touched."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..token_estimate import CHARS_PER_TOKEN, estimate_tokens
from ..types import ChatRequest, EventCallback, StopCheck, Usage
from ..wire import text_of

logger = logging.getLogger("providers")


STOP_POLL_S = 0.05
_DONE = object()


class Stream:
    """Event fan-out and Stop polling for one call."""

    def __init__(self, on_event: EventCallback | None, should_stop: StopCheck | None):
        self._on_event = on_event
        self._should_stop = should_stop
        self.stop_requested = False

    def pump(self, items: Iterable, close: Callable[[], None] | None = None) -> Iterator:
        """Yield the SDK's stream items, read on a helper thread, while polling Stop every STOP_POLL_S.

        A blocked socket read cannot be interrupted from another thread, so waiting for the next event in this
        thread would make Stop wait for the provider. Instead the reader runs apart; on Stop this generator ends
        at once (stop_requested is set), the stream is closed best-effort and the reader is abandoned: it finishes
        when the connection does. Events are still handled on the caller's thread, in order.
        """
        if self._should_stop is None:
            yield from items
            return
        inbox: queue.Queue = queue.Queue()
        abandoned = threading.Event()

        def read() -> None:
            try:
                for item in items:
                    if abandoned.is_set():
                        return
                    inbox.put((item, None))
            except BaseException as exc:  # handed to the caller's thread, which raises it
                inbox.put((_DONE, exc))
                return
            inbox.put((_DONE, None))

        threading.Thread(target=read, name="provider-stream", daemon=True).start()
        try:
            while True:
                if self.stopped():
                    self.stop_requested = True
                    return
                try:
                    item, error = inbox.get(timeout=STOP_POLL_S)
                except queue.Empty:
                    continue
                if error is not None:
                    raise error
                if item is _DONE:
                    return
                yield item
        finally:
            abandoned.set()
            if self.stop_requested and close is not None:
                threading.Thread(target=_quietly, args=(close,), daemon=True).start()

    def emit(self, event: dict) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # a broken listener must not lose a reply that is already being paid for
            logger.exception("on_event listener failed for %s", event.get("type"))

    def stopped(self) -> bool:
        return bool(self._should_stop and self._should_stop())


def _quietly(call: Callable[[], None]) -> None:
    try:
        call()
    except Exception:  # closing an abandoned stream is best-effort
        logger.debug("closing an abandoned provider stream failed", exc_info=True)


def system_text(messages: list[dict]) -> str:
    return "\n\n".join(text_of(m) for m in messages if m.get("role") == "system" and text_of(m))


def malformed_arguments_note(block: dict) -> str:
    """Policy for providers whose tool call arguments must be a JSON object (Anthropic, Gemini): the call is sent
    with {} and this note, placed just before it, carries the exact raw string so the model still sees it."""
    return (
        f"[note: the arguments of tool call {block['id']} ({block['name']}) were not a valid JSON object and are "
        f"sent as {{}}; the raw arguments were: {block.get('arguments_raw', '')}]"
    )


def object_arguments(block: dict) -> tuple[dict, str | None]:
    arguments = block.get("arguments")
    if isinstance(arguments, dict):
        return arguments, None
    return {}, malformed_arguments_note(block)


def image_placeholder(block: dict, provider: str) -> str:
    return f"[image {block.get('ref', '')} omitted: not available to {provider}]"


def data_url_parts(ref: str) -> tuple[str, str] | None:
    """("image/png", base64data) for a data: URL, else None."""
    if not ref.startswith("data:") or ";base64," not in ref:
        return None
    head, data = ref[5:].split(";base64,", 1)
    return head or "application/octet-stream", data


def tool_result_text(block: dict) -> str:
    return block.get("content", "")


def usage_dict(usage: Any) -> dict:
    return usage.to_dict()


def own_thinking(block: dict, provider: str) -> bool:
    """Cross-provider policy: thinking is replayed only to the provider that produced it. Another provider's
    reasoning (and its signature) means nothing elsewhere, and turning it into text would put words in the
    assistant's mouth, so it is left out of that request (it stays in the stored conversation)."""
    return block.get("provider") == provider


def estimated_usage(request: ChatRequest, blocks: list[dict]) -> Usage:
    """For a stopped stream, which never gets the provider's usage: the input estimate plus what arrived."""

    received = sum(len(b.get("text", "")) + len(b.get("arguments_raw", "")) for b in blocks)
    return Usage(
        input_tokens=estimate_tokens(request),
        output_tokens=(received + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN,
        estimated=True,
    )


def max_output_tokens(request: ChatRequest, default: int) -> int:
    return request.settings.max_output_tokens or default


def without_turns(messages: list[dict], leave_out: Callable[[dict], bool]) -> list[dict]:
    """The messages without each turn whose assistant answer `leave_out` marks (a refusal, a blocked prompt): the
    answer and everything since the user message that began its turn, that message included. Providers ask for
    exactly this reset (Anthropic's streaming refusals: otherwise refusals continue; a blocked Gemini prompt is
    blocked again). The stored conversation keeps all of it."""
    out: list[dict] = []
    for message in messages:
        if message.get("role") == "assistant" and leave_out(message):
            while out and out[-1].get("role") in ("assistant", "tool"):
                out.pop()
            if out and out[-1].get("role") == "user":
                out.pop()
            continue
        out.append(message)
    return out
