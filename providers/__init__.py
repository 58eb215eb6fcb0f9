"""Provider layer (providers/README.md#call-shape): ChatUnifier over OpenAI Responses, Anthropic Messages, Gemini,
OpenAI-compatible
Chat Completions and the built-in offline provider. See providers/README.md."""

from .attachments import FileRefused, FilesSupport, files_support
from .catalogue import Capabilities, capabilities
from .context import Pressure, estimate_tokens, measure_active_context, measure_pressure, output_headroom
from .errors import (
    AuthError,
    ContextTooLongError,
    InvalidRequestError,
    NetworkError,
    ProviderError,
    RateLimitedError,
    ServerError,
    TruncatedStreamError,
)
from .summarize import SUMMARY_INSTRUCTION, summarize
from .types import PROVIDERS, ChatRequest, ChatResult, ChatSettings, ToolDefinition, UrlPolicy, Usage
from .unifier import ChatUnifier, check_credentials

__all__ = [
    "PROVIDERS",
    "AuthError",
    "Capabilities",
    "ChatRequest",
    "ChatResult",
    "ChatSettings",
    "ChatUnifier",
    "ContextTooLongError",
    "FileRefused",
    "FilesSupport",
    "InvalidRequestError",
    "NetworkError",
    "Pressure",
    "ProviderError",
    "RateLimitedError",
    "SUMMARY_INSTRUCTION",
    "ServerError",
    "ToolDefinition",
    "TruncatedStreamError",
    "Usage",
    "UrlPolicy",
    "capabilities",
    "check_credentials",
    "estimate_tokens",
    "files_support",
    "measure_active_context",
    "measure_pressure",
    "output_headroom",
    "summarize",
]
