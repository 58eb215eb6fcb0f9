"""Helpers for the tool-loop tests: run a step, store the conversation as JSON, load it back."""

from __future__ import annotations

import json

from providers import ChatRequest, ChatSettings, ChatUnifier, ToolDefinition
from providers.wire import MessageWire, text_message, tool_calls_of, tool_result_message, validate_messages

API_KEYS = {
    "openai": "sk-test-openai-0123456789",
    "anthropic": "sk-ant-test-0123456789",
    "gemini": "AIza-test-0123456789",
    "openai_compatible": "sk-local-0123456789",
}
MODELS = {"openai": "gpt-5", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-pro", "openai_compatible": "qwen3"}

MEMORY_TOOL = ToolDefinition(
    name="memory",
    description="Store and look up durable facts.",
    parameters={
        "type": "object",
        "properties": {"operation": {"type": "string"}, "content": {"type": "string"}},
        "required": ["operation"],
    },
)


def request(provider: str, fake, messages: list[dict], *, thinking: str | None = None, tools=None) -> ChatRequest:
    return ChatRequest(
        provider=provider,
        model=MODELS[provider],
        messages=messages,
        tools=[MEMORY_TOOL] if tools is None else tools,
        settings=ChatSettings(thinking=thinking),
        api_key=API_KEYS[provider],
        base_url=fake.base_url,
    )


def step(provider: str, fake, messages: list[dict], *, on_event=None, should_stop=None, **kwargs):
    return ChatUnifier().chat(request(provider, fake, messages, **kwargs), on_event=on_event, should_stop=should_stop)


def store_and_load(messages: list[dict]) -> list[dict]:
    """What the conversation store does: JSON out, JSON in, validated; the round trip must be lossless."""
    stored = json.dumps(messages)
    loaded = json.loads(stored)
    validate_messages(loaded)
    assert [MessageWire.from_dict(m).to_dict() for m in loaded] == messages
    return loaded


def answer_calls(assistant: dict, content: str = "stored") -> list[dict]:
    return [
        tool_result_message(tool_call_id=call["id"], name=call["name"], content=f"{content} ({call['id']})")
        for call in tool_calls_of(assistant)
    ]


def opening() -> list[dict]:
    return [text_message("system", "You are a careful assistant."), text_message("user", "Remember that tea is green.")]
