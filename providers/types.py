"""The ChatUnifier's request and result types (providers/README.md#call-shape). Messages are MessageWire dicts, the
stored form."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The native provider APIs, then the agent runtimes (coding-agent CLIs that run their own tool loop, see
# providers/runtimes/).
RUNTIMES = ("claude_code", "codex_cli", "vertex_agent", "rlm")
PROVIDERS = ("openai", "anthropic", "gemini", "openai_compatible", "offline", *RUNTIMES)

EventCallback = Callable[[dict], None]
StopCheck = Callable[[], bool]


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict  # JSON Schema of the arguments object


@dataclass(frozen=True)
class ChatSettings:
    temperature: float | None = None
    max_output_tokens: int | None = None
    # Provider-neutral reasoning level: None (provider default), "off", "low", "medium", "high".
    thinking: str | None = None
    # The owner confirmed their temperature for a family whose provider recommends its default (Gemini 3).
    temperature_confirmed: bool = False


@dataclass(frozen=True)
class UrlPolicy:
    """Set when the base URL came from an owner: it is checked against server-side request forgery before use and
    on every request made with it (providers/urlguard.py)."""

    allowed_hosts: tuple[str, ...] = ()
    allow_http: bool = False


@dataclass
class ChatRequest:
    provider: str
    model: str
    messages: list[dict]
    tools: list[ToolDefinition] = field(default_factory=list)
    settings: ChatSettings = field(default_factory=ChatSettings)
    api_key: str | None = None
    base_url: str | None = None
    url_policy: UrlPolicy | None = None
    # Agent runtimes only (providers/runtimes/): the session binding, the project's tools and the limits of one run.
    runtime: Any = None


@dataclass
class Usage:
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    # Anthropic prompt caching: input written to the cache this call (billed above the input rate); cached_tokens
    # is what was read from it. Both are part of input_tokens.
    cache_creation_tokens: int = 0
    # True when the provider never reported usage (a stopped stream): the numbers are local estimates.
    estimated: bool = False
    # What the provider itself reported this call cost (USD), when it does (Claude Code); else priced from the
    # catalogue.
    cost_usd: float | None = None

    def to_dict(self) -> dict:
        data = {
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }
        if self.cache_creation_tokens:
            data["cache_creation_tokens"] = self.cache_creation_tokens
        if self.estimated:
            data["estimated"] = True
        if self.cost_usd is not None:
            data["cost_usd"] = self.cost_usd
        return data


@dataclass
class ChatResult:
    message: dict  # assistant MessageWire with provider_state and usage
    usage: Usage
    stop_reason: str  # end_turn, tool_use, max_tokens, stopped, refusal, other
    provider_ids: dict[str, Any] = field(default_factory=dict)
    # Agent runtimes only: every message the run produced, in order, `message` (its last assistant message)
    # included. The runtime ran the tool calls in them itself, so the firing stores them all and runs none.
    observed: list[dict] | None = None
