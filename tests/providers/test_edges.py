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


# --- 6. Gemini: a blocked prompt is a refusal with its reason, billed, not a broken stream ------------------------


def test_6_a_blocked_prompt_is_reported_with_its_reason_and_its_prompt_tokens_are_billed(gemini_fake):
    key = "AIza-test-6"
    gemini_fake.push(Turn([], stop="blocked", block_reason="PROHIBITED_CONTENT", input_tokens=40))
    gemini_fake.push(Turn([Text("Tea is green.")]))
    messages = [text_message("system", "Be careful."), text_message("user", "Something forbidden.")]
    result = chat("gemini", gemini_fake, "gemini-2.5-flash", messages, api_key=key)
    assert result.stop_reason == "refusal"  # not `truncated`, which would suggest trying again
    (words,) = texts(result.message)
    assert "blocked" in words and "prohibited content" in words
    assert result.message["meta"]["blocked"]["reason"] == "PROHIBITED_CONTENT"
    assert result.usage.input_tokens == 40 and result.usage.output_tokens == 0 and not result.usage.estimated
    # The next turn leaves the blocked prompt out (the fake blocks again while it is in the contents).
    later = store_and_load([*messages, result.message, text_message("user", "What colour is tea?")])
    answer = chat("gemini", gemini_fake, "gemini-2.5-flash", later, api_key=key)
    assert texts(answer.message) == ["Tea is green."]
    assert "Something forbidden." not in str(gemini_fake.last_body["contents"])


# --- 7. Anthropic: a tool call cut by max_tokens never runs -----------------------------------------------------


def test_7_a_call_cut_before_its_arguments_arrived_is_not_kept_and_the_model_is_told(anthropic_fake):
    # The limit hit right after the tool_use block opened: no argument arrived, the block still gets its
    # content_block_stop, and `stop_reason` is max_tokens (Anthropic's tool-use docs: an incomplete tool_use).
    key = "sk-ant-test-7"
    anthropic_fake.push(Turn([Text("Saving it."), Call("memory", "")], stop="max_tokens"), Turn([Text("Ok.")]))
    cut = chat("anthropic", anthropic_fake, "claude-sonnet-4-5", opening(), api_key=key)
    assert cut.stop_reason == "max_tokens"
    assert [b["type"] for b in cut.message["blocks"]] == ["text"]  # nothing left to run
    (note,) = cut.message["meta"]["notes"]
    assert "`memory`" in note and "not made" in note
    later = store_and_load([*opening(), cut.message, text_message("user", "Go on.")])
    chat("anthropic", anthropic_fake, "claude-sonnet-4-5", later, api_key=key)
    replayed = anthropic_fake.last_body["messages"][1]
    assert replayed["role"] == "assistant" and replayed["content"][-1]["text"] == note


# --- 8. OpenAI: encrypted reasoning goes back only to the model and key that issued it ---------------------------


@pytest.mark.parametrize(
    ("model", "key"),
    [("gpt-5.1", "sk-test-8-a"), ("gpt-5", "sk-test-8-b")],
    ids=["model-changed", "key-changed"],
)
def test_8_reasoning_from_another_model_or_key_is_dropped_and_the_text_kept(openai_fake, model, key):
    openai_fake.push(Turn([Think("Careful now."), Text("Green.")]), Turn([Text("Still green.")]))
    first = chat("openai", openai_fake, "gpt-5", opening(), api_key="sk-test-8-a", thinking="low")
    later = store_and_load([*opening(), first.message, text_message("user", "Sure?")])
    second = chat("openai", openai_fake, model, later, api_key=key, thinking="low")
    assert texts(second.message) == ["Still green."] and not openai_fake.rejections
    sent = openai_fake.last_body["input"]
    assert not [i for i in sent if i["type"] == "reasoning"]
    assert any(i.get("role") == "assistant" and "Green." in str(i.get("content")) for i in sent)  # the text stays


def test_8_the_same_model_and_key_still_get_their_reasoning_back(openai_fake):
    openai_fake.push(Turn([Think("Careful now."), Text("Green.")]), Turn([Text("Still green.")]))
    first = chat("openai", openai_fake, "gpt-5", opening(), api_key="sk-test-8-c", thinking="low")
    later = store_and_load([*opening(), first.message, text_message("user", "Sure?")])
    chat("openai", openai_fake, "gpt-5", later, api_key="sk-test-8-c", thinking="low")
    assert [i["type"] for i in openai_fake.last_body["input"]].count("reasoning") == 1 and not openai_fake.rejections


# --- 9. Gemini 3: the default temperature unless the owner confirms theirs ---------------------------------------


@pytest.mark.parametrize("model", ["gemini-3-pro-preview", "gemini-3-flash-preview", "gemini-9-ultra"])
def test_9_gemini_3_keeps_its_default_temperature_unless_the_owner_confirmed(gemini_fake, model):
    # Google's Gemini 3 guide: keep the temperature at its default of 1.0; lower values can make the model loop.
    gemini_fake.push(Turn([Text("ok")]), Turn([Text("ok")]))
    chat("gemini", gemini_fake, model, opening(), api_key="AIza-test-9", temperature=0.2)
    assert "temperature" not in (gemini_fake.last_body.get("generationConfig") or {})
    request = ChatRequest(
        provider="gemini",
        model=model,
        messages=opening(),
        settings=ChatSettings(temperature=0.2, temperature_confirmed=True),
        api_key="AIza-test-9",
        base_url=gemini_fake.base_url,
    )
    ChatUnifier().chat(request)
    assert gemini_fake.last_body["generationConfig"]["temperature"] == 0.2


def test_9_gemini_2_5_still_gets_the_owners_temperature(gemini_fake):
    gemini_fake.push(Turn([Text("ok")]))
    chat("gemini", gemini_fake, "gemini-2.5-flash", opening(), api_key="AIza-test-9", temperature=0.2)
    assert gemini_fake.last_body["generationConfig"]["temperature"] == 0.2


def test_9_the_agent_form_asks_for_the_confirmation_and_says_why_and_the_firing_passes_it_on():
    from types import SimpleNamespace

    from agents.services.prepare import agent_config_of
    from agents.services.provider_request import provider_request_of
    from workflows.nodes.builtin import AgentParams

    field = AgentParams.model_json_schema()["properties"]["temperature_confirmed"]
    assert "Gemini 3" in field["description"] and "default temperature of 1.0" in field["description"]
    params = {"provider": "gemini", "model": "gemini-3-pro-preview", "temperature": 0.2, "temperature_confirmed": True}
    config = agent_config_of({"id": "a", "params": params})
    firing = SimpleNamespace(agent_config=config, tool_bindings=[], workflow=SimpleNamespace(owner_id=0))
    request = provider_request_of(firing, opening(), credentials=False)
    assert request.settings.temperature == 0.2 and request.settings.temperature_confirmed is True
