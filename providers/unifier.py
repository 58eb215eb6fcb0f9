"""ChatUnifier: one call shape for every provider (SDK clients are built per call from settings/overrides)."""

from __future__ import annotations

import importlib

from .adapters.common import Stream
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
        return adapter.chat(request, Stream(on_event, should_stop))


def check_credentials(request: ChatRequest) -> None:
    """Prove that `request`'s key (and base URL) work with one cheap call that uses no tokens (the provider's
    model list). Raises a ProviderError (AuthError for a refused key); the offline provider needs no key."""
    if request.provider == "offline":
        return
    adapter_for(request.provider).check_credentials(request)
