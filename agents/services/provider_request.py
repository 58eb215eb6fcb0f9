"""The provider request a firing sends: its list, its tools and its agent's settings, with the owner's own key."""

from __future__ import annotations

from agents.models import Firing
from provider_keys.selectors import owner_request_overrides
from providers.types import ChatRequest, ChatSettings, ToolDefinition


def provider_request_of(firing: Firing, messages: list[dict], *, credentials: bool = True):
    config = firing.agent_config
    # The owner's own key (and base URL) for this provider when they stored one, else the environment's.
    overrides = (
        owner_request_overrides(owner_id=firing.workflow.owner_id, provider=config["provider"]) if credentials else {}
    )
    return ChatRequest(
        provider=config["provider"],
        model=config["model"],
        messages=messages,
        tools=[ToolDefinition(b["name"], b["description"], b["parameters"]) for b in firing.tool_bindings],
        settings=ChatSettings(
            temperature=config.get("temperature"),
            temperature_confirmed=bool(config.get("temperature_confirmed")),
            max_output_tokens=config.get("max_output_tokens"),
            thinking=config.get("thinking"),
        ),
        **overrides,
    )
