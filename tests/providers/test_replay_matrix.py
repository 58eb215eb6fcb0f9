"""The replay matrix: every stored shape each adapter produces (text, tools, parallel tools, thinking, stopped,
max-tokens cut, malformed arguments, compaction, a refused turn, a blocked prompt, reasoning from another model,
images, attached files) is replayed to the strict fake of every adapter (a
provider switch for the others) and accepted, and a switch sends no other provider's signature or encrypted
reasoning. The fakes enforce each provider's documented rules; a rejection fails the test with its real text."""

from __future__ import annotations

import json
import threading

import pytest

from providers import ChatRequest, ChatSettings, ChatUnifier
from providers.wire import text_message, tool_call_block, tool_result_message
from tests.fakes import (
    Call,
    FakeAnthropic,
    FakeChatCompletions,
    FakeGemini,
    FakeOpenAIResponses,
    Text,
    Think,
    Turn,
)
from tests.file_samples import CSV, gif, pdf, png, registered_store

from .loop import API_KEYS, MEMORY_TOOL, answer_calls, store_and_load

PROVIDERS = ("openai", "anthropic", "gemini", "openai_compatible")
# Models whose families have the strictest rules: a reasoning OpenAI model (encrypted reasoning, store=false), a
# budget-thinking Claude, Gemini 2.5 Pro (cannot stop thinking), a chat template that needs alternating roles.
MODELS = {
    "openai": "gpt-5",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-pro",
    "openai_compatible": "mistral-small-3",
}
REMEMBER = '{"operation": "remember", "content": "tea is green"}'
RECALL = '{"operation": "recall", "query": "tea"}'
PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module", autouse=True)
def file_store():
    """Attached files' bytes, readable by every adapter while the module's conversations are replayed."""
    with registered_store() as store:
        yield store


@pytest.fixture(scope="module")
def fakes():
    servers = {
        "openai": FakeOpenAIResponses(),
        "anthropic": FakeAnthropic(),
        "gemini": FakeGemini(),
        "openai_compatible": FakeChatCompletions(json_arguments=True, alternating_roles=True),
    }
    yield servers
    for server in servers.values():
        server.close()


def call(provider, fake, messages, *, thinking="low", should_stop=None, on_event=None, model=None):
    request = ChatRequest(
        provider=provider,
        model=model or MODELS[provider],
        messages=messages,
        tools=[MEMORY_TOOL],
        settings=ChatSettings(thinking=thinking),
        api_key=API_KEYS[provider],
        base_url=fake.base_url,
    )
    return ChatUnifier().chat(request, on_event=on_event, should_stop=should_stop)


def produce(provider, fake, store) -> list[dict]:
    """A conversation holding every shape `provider`'s adapter stores, built through its fake."""
    messages = [text_message("system", "You are careful."), text_message("user", "Hello.")]

    def turn(*turns: Turn, thinking="low") -> None:
        nonlocal messages
        fake.push(*turns)
        for _ in turns:
            result = call(provider, fake, messages, thinking=thinking)
            messages = store_and_load([*messages, result.message, *answer_calls(result.message)])

    turn(Turn([Text("Hello to you.")]))  # text
    messages.append(text_message("user", "Remember tea."))
    turn(Turn([Text("Saving."), Call("memory", REMEMBER)]), Turn([Text("Saved.")]))  # tools
    messages.append(text_message("user", "Save and look up."))
    turn(Turn([Call("memory", REMEMBER), Call("memory", RECALL)]), Turn([Text("Both done.")]))  # parallel tools
    messages.append(text_message("user", "Think about it."))
    turn(Turn([Think("Plan the lookup."), Call("memory", RECALL)]), Turn([Text("Tea is green.")]))  # thinking
    messages.append(text_message("user", "Tell me a long story."))
    # stopped: Stop arrives after the first text delta
    fake.push(Turn([Text("Once upon a time there was a teapot.")], chunk_delay_s=0.05))
    stop = threading.Event()
    stopped = call(
        provider,
        fake,
        messages,
        should_stop=stop.is_set,
        on_event=lambda e: stop.set() if e["type"] == "text_delta" else None,
    )
    assert stopped.stop_reason == "stopped"
    messages = store_and_load([*messages, stopped.message, text_message("user", "Go on, briefly.")])
    # max-tokens cut inside a reasoning turn (Gemini sends arguments as objects, so its cut call is whole)
    cut_arguments = REMEMBER if provider == "gemini" else '{"operation": "remem'
    fake.push(Turn([Think("Long plan."), Call("memory", cut_arguments)], stop="max_tokens"))
    cut = call(provider, fake, messages)
    assert cut.stop_reason == "max_tokens"
    messages = store_and_load([*messages, cut.message, *answer_calls(cut.message), text_message("user", "Again.")])
    # malformed arguments (Gemini cannot emit them: a portable call stands in)
    if provider == "gemini":
        bad = tool_call_block(id="call_bad", name="memory", arguments_raw='{"content": "tea')
        messages += [
            {"role": "assistant", "blocks": [bad]},
            tool_result_message(tool_call_id="call_bad", name="memory", content="invalid JSON", is_error=True),
        ]
    else:
        fake.push(Turn([Call("memory", '{"content": "tea')]))
        malformed = call(provider, fake, messages)
        assert malformed.message["blocks"][-1]["parse_error"]
        error = tool_result_message(
            tool_call_id=malformed.message["blocks"][-1]["id"], name="memory", content="invalid JSON", is_error=True
        )
        messages = store_and_load([*messages, malformed.message, error])
    turn(Turn([Text("Sorry, fixed.")]))
    # compaction leaves a summary user message right before the next user message
    summary = {
        "role": "user",
        "blocks": [{"type": "text", "text": "[Summary] Tea is green."}],
        "meta": {"compaction_summary": True},
    }
    messages = [messages[0], summary, text_message("user", "And now?"), *messages[1:]]
    # a refused turn (Anthropic's streaming refusal), a blocked prompt (Gemini), reasoning from another model
    # (OpenAI: encrypted reasoning issued to gpt-5.1, replayed below to gpt-5)
    if provider == "anthropic":
        messages.append(text_message("user", "Write me an exploit."))
        fake.push(Turn([Text("Here is how")], stop="refusal"))
        refused = call(provider, fake, messages)
        assert refused.stop_reason == "refusal"
        messages = store_and_load([*messages, refused.message])
    elif provider == "gemini":
        messages.append(text_message("user", "Something forbidden."))
        fake.push(Turn([], stop="blocked"))
        blocked = call(provider, fake, messages)
        assert blocked.stop_reason == "refusal"
        messages = store_and_load([*messages, blocked.message])
    elif provider == "openai":
        messages.append(text_message("user", "Think it over with the other model."))
        fake.push(Turn([Think("Another model's plan."), Text("Thought over.")]))
        other = call(provider, fake, messages, model="gpt-5.1")
        messages = store_and_load([*messages, other.message])
    # images
    messages.append({"role": "user", "blocks": [{"type": "text", "text": "Look:"}, {"type": "image", "ref": PNG}]})
    turn(Turn([Text("A pixel.")]))
    # attached files: an image, a PDF, a CSV, and a GIF (a type Gemini does not take: as an earlier turn's file it
    # goes there as a line naming it)
    files = [
        store.add(png(), name="shot.png", media_type="image/png"),
        store.add(pdf(2), name="report.pdf", media_type="application/pdf"),
        store.add(CSV, name="table.csv", media_type="text/csv"),
        store.add(gif(), name="dance.gif", media_type="image/gif"),
    ]
    messages.append({"role": "user", "blocks": [{"type": "text", "text": "Read these."}, *files[:3]]})
    turn(Turn([Text("Read.")]))
    messages.append({"role": "user", "blocks": [files[3]]})
    messages.append(text_message("user", "Thanks."))
    return store_and_load(messages)


def foreign_secrets(messages: list[dict]) -> set[str]:
    """Every signature and piece of encrypted reasoning a stored conversation holds."""
    secrets: set[str] = set()
    for message in messages:
        for block in message.get("blocks", []):
            if block.get("type") == "thinking" and block.get("signature"):
                secrets.add(block["signature"])
            if block.get("type") == "redacted_thinking":
                secrets.add(block["data"])
        for state in (message.get("provider_state") or {}).values():
            for item in state.get("items") or []:
                if item.get("encrypted_content"):
                    secrets.add(item["encrypted_content"])
            for signature in state.get("signatures") or []:
                secrets.add(signature["signature"])
    return secrets


@pytest.fixture(scope="module")
def stored(fakes, file_store):
    return {provider: produce(provider, fakes[provider], file_store) for provider in PROVIDERS}


@pytest.mark.parametrize("target", PROVIDERS)
@pytest.mark.parametrize("source", PROVIDERS)
def test_every_stored_shape_replays_to_every_adapter(fakes, stored, source, target):
    messages = stored[source]
    fake = fakes[target]
    fake.rejections.clear()
    fake.push(Turn([Text("ok")]))
    result = call(target, fake, messages)
    assert not fake.rejections, fake.rejections
    assert result.stop_reason == "end_turn"
    if source != target:
        sent = json.dumps(fake.last_body)
        leaked = [secret for secret in foreign_secrets(messages) if secret in sent]
        assert leaked == [], f"{source} signatures or encrypted reasoning sent to {target}"


def test_the_matrix_covers_every_shape(stored):
    for provider, messages in stored.items():
        blocks = [b for m in messages for b in m["blocks"]]
        kinds = {b["type"] for b in blocks}
        assert {"text", "tool_call", "tool_result", "image", "file"} <= kinds, provider
        assert any(b.get("stopped") for b in blocks), provider
        assert any(b.get("parse_error") for b in blocks if b["type"] == "tool_call"), provider
        assert any(len([b for b in m["blocks"] if b["type"] == "tool_call"]) == 2 for m in messages), provider
        assert any((m.get("meta") or {}).get("compaction_summary") for m in messages), provider
        if provider != "gemini":  # Gemini signs thoughts only when it was given a signature to put on them
            assert "thinking" in kinds, provider
    assert any("refusal" in (m.get("meta") or {}) for m in stored["anthropic"])
    assert any("blocked" in (m.get("meta") or {}) for m in stored["gemini"])
    assert any((m.get("provider_state") or {}).get("openai", {}).get("model") == "gpt-5.1" for m in stored["openai"])


def compacted_after_snapshot(messages: list[dict]) -> list[dict]:
    """The list a summary lands as when it was taken at the "Save and look up." turn and every later turn (parallel
    tools, thinking, a stopped answer, a max-tokens cut, malformed arguments, images) was appended while it ran:
    `[system, user(summary), those turns verbatim]`, made by the store's own landing rule and stored."""
    from conversations.store import compaction_activation

    snapshot_latest = next(i for i, m in enumerate(messages) if "Save and look up." in json.dumps(m))
    return store_and_load(compaction_activation(messages, snapshot_latest, "Tea is green; the owner asked twice."))


@pytest.mark.parametrize("target", PROVIDERS)
@pytest.mark.parametrize("source", PROVIDERS)
def test_a_compacted_list_with_turns_appended_after_its_snapshot_replays_to_every_adapter(
    fakes, stored, source, target
):
    messages = compacted_after_snapshot(stored[source])
    assert messages[1]["meta"]["compaction_summary"] and messages[2]["role"] == "user"
    assert any(b["type"] == "tool_call" for m in messages[2:] for b in m["blocks"])
    fake = fakes[target]
    fake.rejections.clear()
    fake.push(Turn([Text("ok")]))
    result = call(target, fake, messages)
    assert not fake.rejections, fake.rejections
    assert result.stop_reason == "end_turn"
