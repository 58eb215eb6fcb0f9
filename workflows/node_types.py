"""What the editor page (and any API client) needs to know about node types, read from the NodeSpec registry.

The page builds its palette, its handles and its side-panel forms from this alone: a type registered by another
app shows up without a line of page code. `systemManaged` types are listed (the page draws them) but kept out of
the palette; the Context is added from an agent's context handle instead.
"""

from __future__ import annotations

from providers import config as provider_config
from providers.catalogue import catalogue_data
from providers.types import PROVIDERS

from .nodes import (
    FIRES_ON_ITS_OWN,
    IS_AGENT,
    IS_CONTEXT_PANEL,
    IS_TRIGGER,
    REQUIRES_CONTEXT,
    SYSTEM_MANAGED,
    NodeSpec,
    node_specs,
)

KNOWN_CAPABILITIES = (REQUIRES_CONTEXT, IS_CONTEXT_PANEL, SYSTEM_MANAGED, IS_AGENT, IS_TRIGGER, FIRES_ON_ITS_OWN)

PROVIDER_LABELS = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "gemini": "Google Gemini",
    "openai_compatible": "OpenAI-compatible (Ollama, vLLM, llama.cpp)",
    "offline": "Offline (built in, no network)",
}

# What the model field becomes when the owner picks a provider in the editor (each one a model the catalogue knows
# for that provider, or the built-in offline model). None: the owner names one (the check marks the empty field).
PROVIDER_DEFAULT_MODELS = {
    "openai": "gpt-4.1",
    "anthropic": "claude-sonnet-4-6",
    "gemini": "gemini-2.5-flash",
    "openai_compatible": "qwen3",
    "offline": "offline-echo",
    "claude_code": "claude-sonnet-4-5",
    "codex_cli": "gpt-5",
    "vertex_agent": None,
    "rlm": "gpt-4.1",
}


def _handle_data(handle, direction: str) -> dict:
    return {
        "id": handle.id,
        "kind": handle.kind,
        "direction": direction,
        "maxConnections": handle.max_connections,
        "label": handle.label or handle.kind,
    }


def _panel(spec: NodeSpec) -> str | None:
    # Which owner panel a node of this type opens; capabilities and hooks decide, never the type's name. A type
    # whose app draws its own section of the side panel says so in `extra["panel"]` (an MCP server: "mcp").
    if spec.extra.get("panel"):
        return spec.extra["panel"]
    if spec.has(IS_CONTEXT_PANEL):
        return "context"
    if spec.clear_memory is not None:
        return "memory"
    # A type another app owns may name its own panel (the webhook trigger's address).
    return spec.extra.get("panel")


def node_type_data(spec: NodeSpec) -> dict:
    capabilities = {name: spec.has(name) for name in KNOWN_CAPABILITIES}
    capabilities.update({name: True for name in spec.capabilities})
    return {
        "type": spec.type,
        "label": spec.label,
        "description": spec.description,
        "inputs": [_handle_data(h, "input") for h in spec.inputs],
        "outputs": [_handle_data(h, "output") for h in spec.outputs],
        "capabilities": capabilities,
        "palette": not spec.has(SYSTEM_MANAGED),
        "paramsSchema": spec.params_model.model_json_schema(),
        "newParams": dict(spec.new_params),
        "toolName": spec.tool_name if isinstance(spec.tool_name, str) else None,
        "hasResetHook": spec.reset_execution_state is not None,
        "panel": _panel(spec),
    }


def provider_catalogue() -> list[dict]:
    """The providers an agent can use and the models the catalogue knows for each (any other name is allowed:
    unknown models fall back to the provider's defaults). `configured` says whether a server-wide key is set."""
    entries = catalogue_data()
    rows = []
    for provider in PROVIDERS:
        models = entries.get(provider, {}) if isinstance(entries.get(provider), dict) else {}
        rows.append(
            {
                "id": provider,
                "label": PROVIDER_LABELS.get(provider, provider),
                "models": [
                    {
                        "id": name,
                        "contextWindow": entry.get("context_window"),
                        "reasoning": bool(entry.get("reasoning", False)),
                    }
                    for name, entry in models.items()
                    if name != "*" and isinstance(entry, dict)
                ],
                "defaultModel": PROVIDER_DEFAULT_MODELS.get(provider),
                "needsKey": provider not in ("offline", "openai_compatible"),
                "configured": provider == "offline" or bool(provider_config.api_key_for(provider)),
            }
        )
    return rows


def node_type_catalogue() -> dict:
    return {"types": [node_type_data(spec) for spec in node_specs()], "providers": provider_catalogue()}
