"""The runtime offers and runs tools through each NodeSpec's tool contract, never a list of type names."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.store import conversation_key, load_conversation
from tests.agents.factories import agent_node, edge, started_workflow
from tests.fakes import Call, FakeChatCompletions, Text, Turn
from workflows.nodes.registry import KIND_TOOL, Handle, NodeSpec, register_node_spec, unregister_node_spec

pytestmark = pytest.mark.django_db(transaction=True)


class _NoParams(BaseModel):
    pass


@pytest.fixture
def stamp_tool():
    """A tool type no runtime code knows: it stamps the text it is given, and records each call it answered."""
    calls = []

    def call_hook(call):
        calls.append(call)
        return {"ok": True, "stamped": f"[{call.arguments.get('text', '')}]", "node": call.node_id}

    spec = NodeSpec(
        type="stamper",
        label="Stamper",
        params_model=_NoParams,
        outputs=(Handle("output-tool", KIND_TOOL),),
        tool_name="stamp",
        tool_schema=lambda: {
            "description": "Stamp a text.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
        tool_call=call_hook,
    )
    register_node_spec(spec)
    yield calls
    unregister_node_spec("stamper")


@pytest.fixture
def no_contract_tool():
    spec = NodeSpec(
        type="mute",
        label="Mute",
        params_model=_NoParams,
        outputs=(Handle("output-tool", KIND_TOOL),),
        tool_name="mute",
    )
    register_node_spec(spec)
    yield
    unregister_node_spec("mute")


def _workflow(owner, tool_type: str):
    return started_workflow(
        owner,
        [
            {"id": "trigger", "type": "chatTrigger", "params": {}},
            agent_node("lead", "Lead", provider="openai_compatible", model="qwen3"),
            {"id": "ctx", "type": "context", "params": {}},
            {"id": "tool", "type": tool_type, "params": {}},
        ],
        [
            edge("trigger", "output-main", "lead", "input-main"),
            edge("ctx", "output-context", "lead", "input-context"),
            edge("tool", "output-tool", "lead", "input-tools"),
        ],
    )


def test_a_tool_type_registered_in_a_test_is_offered_and_run_end_to_end(owner, inline, monkeypatch, stamp_tool):
    with FakeChatCompletions() as fake:
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-test-0123456789abcdef")
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", fake.base_url)
        workflow, generation, ids = _workflow(owner, "stamper")
        fake.push(Turn([Call("stamp", '{"text": "approved"}')]), Turn([Text("Stamped it.")]))
        firing = Firing.objects.get(
            pk=firing_start(
                workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="stamp approved"
            )
        )
        first_request, second_request = (r.body for r in fake.requests)

    assert firing.state == Firing.State.FINISHED and firing.final_text == "Stamped it."
    (offered,) = first_request["tools"]
    assert offered["function"]["name"] == "stamp" and offered["function"]["description"] == "Stamp a text."
    (call,) = stamp_tool
    assert call.node_id == ids["tool"] and call.arguments == {"text": "approved"}
    assert call.actor == f"agent:{ids['lead']}" and call.idempotency_key.startswith(f"{firing.pk}:")
    tool_message = second_request["messages"][-1]
    assert tool_message["role"] == "tool" and json.loads(tool_message["content"])["stamped"] == "[approved]"
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]


def test_a_tool_type_without_a_contract_fails_the_firing_with_a_code(owner, inline, no_contract_tool):
    workflow, generation, ids = _workflow(owner, "mute")
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )
    assert firing.state == Firing.State.FAILED and firing.error_code == "tool_unavailable"
    assert "offers no tool" in firing.error_message
