"""An MCP firing's stored turns (calls, text results, an `isError` result, structured content, an image placeholder)
replayed to every native provider's strict fake, with the MCP tools' own schemas declared: each accepts them."""

from __future__ import annotations

import pytest

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.store import conversation_key, load_conversation
from providers import ToolDefinition
from tests.fakes import FakeAnthropic, FakeChatCompletions, FakeGemini, FakeOpenAIResponses, Text, Turn
from tests.mcp_nodes.helpers import mcp_workflow
from tests.providers.loop import step

from .test_calls import _http

pytestmark = pytest.mark.django_db(transaction=True)

FAKES = {
    "openai": FakeOpenAIResponses,
    "anthropic": FakeAnthropic,
    "gemini": FakeGemini,
    "openai_compatible": lambda: FakeChatCompletions(json_arguments=True, alternating_roles=True),
}


def test_a_stored_mcp_turn_replays_to_every_native_provider(owner, inline, http_server):
    params = _http(owner, http_server, "echo", "fail", "measure", "picture")
    workflow, generation, ids = mcp_workflow(owner, params)
    prompt = "\n".join(
        [
            'call echo: {"text": "tea"}',
            'call fail: {"reason": "no kettle"}',
            'call measure: {"text": "a b"}',
            "call picture:",
        ]
    )
    firing = Firing.objects.get(pk=firing_start(workflow, generation, ids["lead"], prompt))
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "tool", "tool", "tool", "assistant"]
    tools = [ToolDefinition(b["name"], b["description"], b["parameters"]) for b in firing.tool_bindings]
    messages = [*stored, {"role": "user", "blocks": [{"type": "text", "text": "And now?"}]}]
    for provider, make in FAKES.items():
        fake = make()
        try:
            fake.push(Turn([Text("All four answered.")]))
            result = step(provider, fake, messages, tools=tools)
            body = fake.requests[-1].body
        finally:
            fake.close()
        assert result.message["blocks"][0]["text"] == "All four answered.", provider
        sent = str(body)
        assert "echo: tea" in sent and "it failed because no kettle" in sent and "[image image/png" in sent, provider
        assert "Say the text back." in sent, provider  # the MCP tool's own description, declared as a function
