"""ChatUnifier: one call shape for every provider (SDK clients are built per call from settings/overrides)."""

from __future__ import annotations

import importlib

from .adapters.common import Stream
from .attachments import FileRefused, earlier_files_as_text, has_earlier_files
from .errors import InvalidRequestError, UnknownProviderError
from .readonly import ReadOnlyDict
from .types import PROVIDERS, ChatRequest, ChatResult, EventCallback, StopCheck
from .wire import MessageWire, WireError

ADAPTERS = {
    "openai": "providers.adapters.openai_responses",
    "anthropic": "providers.adapters.anthropic_messages",
    "gemini": "providers.adapters.gemini",
    "openai_compatible": "providers.adapters.openai_compatible",
    "offline": "providers.adapters.offline",
    "claude_code": "providers.runtimes.claude_code",
    "codex_cli": "providers.runtimes.codex_cli",
    "vertex_agent": "providers.runtimes.vertex_agent",
    "rlm": "providers.runtimes.rlm",
}


def adapter_for(provider: str):
    if provider not in PROVIDERS:
        raise UnknownProviderError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    # Imported on first use: the offline default must not pay for importing three SDKs.
    return importlib.import_module(ADAPTERS[provider])


class ChatUnifier:
    def chat(
        self, request: ChatRequest, on_event: EventCallback | None = None, should_stop: StopCheck | None = None
    ) -> ChatResult:
        """Send `request.messages` (MessageWire dicts, never modified) to the provider and return its reply as an
        assistant MessageWire. One attempt, no retries. Raises a providers.errors.ProviderError subclass."""
        adapter = adapter_for(request.provider)
        for index, message in enumerate(request.messages):
            if isinstance(message, ReadOnlyDict):
                continue  # the store's own copy: validated when it was written, not again on every request
            try:
                MessageWire.from_dict(message)
            except WireError as exc:
                raise InvalidRequestError(f"messages[{index}]: {exc}", provider=request.provider) from None
        try:
            return adapter.chat(request, Stream(on_event, should_stop))
        except InvalidRequestError as exc:
            if not _may_be_a_file(request, exc):
                raise
            refused = exc
        # The provider refused a request carrying files of earlier turns, before any work (nothing billed): once
        # more with those files as their text, so a file it will not take cannot make the stored conversation
        # unanswerable. A file of the message being answered is not retried: that turn ends with the reason.
        with earlier_files_as_text(request.provider):
            result = adapter.chat(request, Stream(on_event, should_stop))
        meta = result.message.setdefault("meta", {})
        meta.setdefault("notes", []).append(
            "Files attached earlier in this conversation were sent as their text (or a line naming them): the "
            f"provider refused the request with them as files ({refused.message})."
        )
        return result


_FILE_WORDS = ("image", "pdf", "document", "file", "media", "mime", "page", "payload", "too large")
NATIVE = ("openai", "anthropic", "gemini", "openai_compatible")


def _may_be_a_file(request: ChatRequest, exc: InvalidRequestError) -> bool:
    """A provider's refusal that may be about a file of an earlier turn: worth one more request without them."""
    if isinstance(exc, FileRefused) or request.provider not in NATIVE or not has_earlier_files(request.messages):
        return False
    return any(word in exc.message.lower() for word in _FILE_WORDS)


def check_credentials(request: ChatRequest) -> None:
    """Prove that `request`'s key (and base URL) work with one cheap call that uses no tokens (the provider's
    model list). Raises a ProviderError (AuthError for a refused key); the offline provider needs no key."""
    if request.provider == "offline":
        return
    adapter_for(request.provider).check_credentials(request)
