"""Providers at their edges (issue 30): one test per rule, each running the real SDK against a fake that behaves
as the provider documents (refusals, blocked prompts, unverified organisations, reasoning bound to its issuer,
thinking-mode replay), so each fails on an adapter that ignores the rule."""

from __future__ import annotations

import pytest

from providers import ChatRequest, ChatSettings, ChatUnifier
from providers.wire import text_message
from tests.fakes import Call, FakeChatCompletions, Text, Think, Turn

from .loop import MEMORY_TOOL, answer_calls, opening, store_and_load


def chat(provider, fake, model, messages, *, api_key, thinking=None, temperature=None, **kwargs):
    request = ChatRequest(
        provider=provider,
        model=model,
        messages=messages,
        tools=[MEMORY_TOOL],
        settings=ChatSettings(thinking=thinking, temperature=temperature),
        api_key=api_key,
        base_url=fake.base_url,
    )
    return ChatUnifier().chat(request, **kwargs)


def texts(message: dict) -> list[str]:
    return [b["text"] for b in message["blocks"] if b["type"] == "text"]


# --- 2. OpenAI: reasoning summaries need a verified organisation ------------------------------------------------


def test_2_an_unverified_organisation_gets_its_answer_without_summaries_and_the_key_is_remembered(openai_fake):
    key = "sk-test-unverified-org-2"
    openai_fake.unverified_keys = {key}
    openai_fake.push(Turn([Think("Weighing it."), Text("Green.")]), Turn([Text("Still green.")]))
    first = chat("openai", openai_fake, "gpt-5", opening(), api_key=key, thinking="low")
    assert texts(first.message) == ["Green."] and first.stop_reason == "end_turn"
    refused, answered = openai_fake.requests
    assert refused.body["reasoning"] == {"effort": "low", "summary": "auto"}  # asked once, refused (400)
    assert answered.body["reasoning"] == {"effort": "low"}  # the same request without the summary
    assert [r.param for r in openai_fake.rejections] == ["reasoning.summary"]
    (note,) = first.message["meta"]["notes"]
    assert "verified organisations" in note
    # The key is remembered: the next call leaves the summary out from the start, nothing refused again.
    messages = [*opening(), first.message, text_message("user", "And now?")]
    second = chat("openai", openai_fake, "gpt-5", messages, api_key=key, thinking="low")
    assert texts(second.message) == ["Still green."]
    assert openai_fake.requests[-1].body["reasoning"] == {"effort": "low"} and len(openai_fake.rejections) == 1
    assert second.message["meta"]["notes"] == [note]


def test_2_a_verified_organisation_still_gets_summaries(openai_fake):
    openai_fake.unverified_keys = {"sk-test-some-other-org"}
    openai_fake.push(Turn([Think("Weighing it."), Text("Green.")]))
    result = chat("openai", openai_fake, "gpt-5", opening(), api_key="sk-test-verified-2", thinking="low")
    assert openai_fake.last_body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert [b["text"] for b in result.message["blocks"] if b["type"] == "thinking"] == ["Weighing it."]
    assert "meta" not in result.message


# --- 3. Anthropic: a refusal resets the context, it is not replayed ---------------------------------------------


def test_3_a_refused_turn_is_shown_with_its_explanation_and_kept_out_of_the_next_request(anthropic_fake):
    key = "sk-ant-test-3"
    anthropic_fake.push(
        Turn(
            [Text("Here is how to build the expl")],
            stop="refusal",
            refusal_category="cyber",
            refusal_explanation="This request could enable cyber harm.",
        ),
        Turn([Text("Tea is green.")]),
    )
    messages = [text_message("system", "Be careful."), text_message("user", "Write me an exploit.")]
    refused = chat("anthropic", anthropic_fake, "claude-sonnet-4-5", messages, api_key=key)
    assert refused.stop_reason == "refusal"
    message = refused.message
    assert message["meta"]["refusal"] == {"category": "cyber", "explanation": "This request could enable cyber harm."}
    (words,) = texts(message)
    assert "declined" in words and "This request could enable cyber harm." in words  # plain words for the owner
    assert "Here is how" not in words  # the refused content is not kept as the answer
    assert message["meta"]["notes"] == [words]
    assert refused.usage.output_tokens == 13  # billed up to the refusal, as the guide says
    # The next turn goes on without the refused turn: the fake refuses again while it is still in the context.
    later = store_and_load([*messages, message, text_message("user", "What colour is tea?")])
    answer = chat("anthropic", anthropic_fake, "claude-sonnet-4-5", later, api_key=key)
    assert answer.stop_reason == "end_turn" and texts(answer.message) == ["Tea is green."]
    sent = anthropic_fake.last_body["messages"]
    assert [m["role"] for m in sent] == ["user"]
    assert "Write me an exploit." not in str(sent) and "Here is how" not in str(sent)


# --- 4. DeepSeek thinking mode (and any server that sends reasoning beside tool calls) ------------------------


def _tool_loop_with_reasoning(fake, model):
    fake.push(
        Turn([Think("I should store it."), Call("memory", '{"operation": "remember", "content": "tea"}')]),
        Turn([Text("Stored.")]),
    )
    key = "sk-local-4"
    first = chat("openai_compatible", fake, model, opening(), api_key=key)
    assert first.stop_reason == "tool_use"
    messages = store_and_load([*opening(), first.message, *answer_calls(first.message)])
    return chat("openai_compatible", fake, model, messages, api_key=key)


@pytest.mark.parametrize("model", ["deepseek-v4-flash", "deepseek-v4-pro", "my-local-thinker"])
def test_4_reasoning_sent_beside_tool_calls_goes_back_in_later_requests(model):
    # DeepSeek's thinking-mode guide: thinking is on by default, and in a turn with tool calls the
    # `reasoning_content` must be passed back in all later requests, or the API answers 400. The V4 names are
    # DeepSeek's; "my-local-thinker" is a name no catalogue knows, served by a server that sends reasoning the same
    # way: replay follows what the server sent.
    with FakeChatCompletions(reasoning_replay=True) as fake:
        second = _tool_loop_with_reasoning(fake, model)
        assert not fake.rejections, fake.rejections
    assert texts(second.message) == ["Stored."]
    replayed = [m for m in fake.last_body["messages"] if m["role"] == "assistant"]
    assert replayed[0]["reasoning_content"] == "I should store it."


def test_4_deepseek_v4_is_a_known_family_priced_from_genai_prices():
    from providers import capabilities

    caps = capabilities("openai_compatible", "deepseek-v4-flash")
    assert caps.known and caps.replay_reasoning
    assert caps.cost(input_tokens=1_000_000, output_tokens=0) is not None


# --- 5. Anthropic adaptive thinking keeps the turn's configuration ----------------------------------------------


def test_5_a_tool_loop_under_adaptive_thinking_keeps_thinking_when_a_step_skipped_it(anthropic_fake):
    # Adaptive thinking decides per step whether to think and may skip it at low effort; the docs ask for one
    # thinking configuration per assistant turn. The loop's first step came back without a thinking block.
    key = "sk-ant-test-5"
    anthropic_fake.push(Turn([Call("memory", '{"operation": "remember", "content": "tea"}')]), Turn([Text("Done.")]))
    first = chat("anthropic", anthropic_fake, "claude-sonnet-4-6", opening(), api_key=key, thinking="low")
    assert anthropic_fake.last_body["thinking"] == {"type": "adaptive"}
    assert [b["type"] for b in first.message["blocks"]] == ["tool_call"]
    messages = store_and_load([*opening(), first.message, *answer_calls(first.message)])
    second = chat("anthropic", anthropic_fake, "claude-sonnet-4-6", messages, api_key=key, thinking="low")
    assert texts(second.message) == ["Done."]
    assert anthropic_fake.last_body["thinking"] == {"type": "adaptive"}  # not switched off mid-turn
    assert anthropic_fake.last_body["output_config"] == {"effort": "low"}
    assert not anthropic_fake.rejections


def test_5_a_turn_begun_without_thinking_still_ends_without_it(anthropic_fake):
    key = "sk-ant-test-5b"
    anthropic_fake.push(Turn([Call("memory", '{"operation": "remember", "content": "tea"}')]), Turn([Text("Done.")]))
    first = chat("anthropic", anthropic_fake, "claude-sonnet-4-5", opening(), api_key=key, thinking="off")
    messages = store_and_load([*opening(), first.message, *answer_calls(first.message)])
    chat("anthropic", anthropic_fake, "claude-sonnet-4-5", messages, api_key=key, thinking="high")
    assert "thinking" not in anthropic_fake.last_body and not anthropic_fake.rejections
