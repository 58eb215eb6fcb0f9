"""Codex CLI as an agent provider: the real bundled `codex` binary against the fake OpenAI Responses server."""

from __future__ import annotations

import pytest

from agents.models import Firing
from agents.services.firings import fire_agent
from conversations.models import RuntimeSessionBinding, UsageRecord
from conversations.store import conversation_key, load_conversation
from conversations.wire import validate_messages
from tests.agents.factories import assistant_with
from tests.fakes.base import Text, Think, Turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _fire(workflow, generation, agent, prompt) -> Firing:
    firing = Firing.objects.get(pk=fire_agent(workflow, generation, agent, prompt))
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    return firing


def _input_texts(body: dict) -> list[tuple[str, str]]:
    return [
        (item.get("role"), part.get("text", ""))
        for item in body.get("input", [])
        if item.get("type") == "message"
        for part in item.get("content", [])
    ]


def test_codex_events_land_as_messagewire_and_the_next_firing_carries_them_as_text(owner, openai_fake, runtime_dir):
    workflow, generation, ids = assistant_with(owner, provider="codex_cli", model="gpt-5")
    openai_fake.push(Turn([Think("Greeting."), Text("Hi, Codex here.")]))
    first = _fire(workflow, generation, ids["lead"], "hello codex")
    assert first.final_text == "Hi, Codex here."
    body = openai_fake.requests[-1].body
    assert body["store"] is False
    offered = {t.get("name") or t.get("type") for t in body.get("tools", [])}
    assert not offered & {"exec_command", "shell", "web_search", "apply_patch"}  # no shell, no writes, no web
    texts = _input_texts(body)
    assert ("user", "hello codex") in texts
    assert any(role == "developer" and "You are Lead." in text for role, text in texts)
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    validate_messages(stored)
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    kinds = [b["type"] for b in stored[-1]["blocks"]]
    assert kinds[-2:] == ["thinking", "text"]
    assert stored[-1]["blocks"][-2]["text"] == "Greeting." and stored[-1]["blocks"][-2]["signature"] is None
    runtime = stored[-1]["meta"]["runtime"]
    assert runtime["runtime"] == "codex_cli" and runtime["resumed"] is False and runtime["thread_id"]
    assert not RuntimeSessionBinding.objects.exists()  # nothing to resume: no binding is kept
    assert not list(runtime_dir.glob("codex_cli/*/codex-home-*"))  # the run's CODEX_HOME is gone
    (row,) = UsageRecord.objects.filter(provider="codex_cli")
    assert row.input_tokens == 21 and row.output_tokens == 13 and row.cost > 0

    openai_fake.push(Turn([Text("You said hello codex.")]))
    _fire(workflow, generation, ids["lead"], "what did I say?")
    texts = _input_texts(openai_fake.requests[-1].body)
    (prompt,) = [text for role, text in texts if role == "user" and "what did I say?" in text]
    assert "<transcript>" in prompt and "[user] hello codex" in prompt and "[assistant] Hi, Codex here." in prompt
    # Nothing of run 1's own state is replayed: no reasoning item, no earlier output item, only the transcript.
    assert {i.get("type") for i in openai_fake.requests[-1].body["input"]} == {"message"}
