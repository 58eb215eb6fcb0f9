"""One test per finding of the providers review (issue 16): requests the real services refuse and stored turns
that poisoned every later request. Each runs the real SDK against a strict fake (tests/fakes) that enforces the
provider's documented rule with its real error text."""

from __future__ import annotations

import copy
import threading

import pytest

from providers import ChatRequest, ChatSettings, ChatUnifier
from providers.wire import text_message, tool_call_block, tool_result_message, validate_messages
from tests.fakes import Call, FakeChatCompletions, Text, Think, Turn
from tests.fakes.gemini import thinking_config

from .loop import API_KEYS, MEMORY_TOOL, answer_calls, opening, store_and_load

REMEMBER = '{"operation": "remember", "content": "tea is green"}'


def chat(provider, fake, model, messages, *, thinking=None, temperature=None, max_output_tokens=None, **kwargs):
    request = ChatRequest(
        provider=provider,
        model=model,
        messages=messages,
        tools=[MEMORY_TOOL],
        settings=ChatSettings(thinking=thinking, temperature=temperature, max_output_tokens=max_output_tokens),
        api_key=API_KEYS[provider],
        base_url=fake.base_url,
    )
    return ChatUnifier().chat(request, **kwargs)


def accepted(fake):
    assert not fake.rejections, fake.rejections


# --- 1. Gemini: the thinking knob per model family ---------------------------------------------------------------


def test_1_gemini_2_5_gets_a_budget_never_a_level(gemini_fake):
    gemini_fake.push(Turn([Text("ok")]))
    chat("gemini", gemini_fake, "gemini-2.5-flash", opening(), thinking="low")
    thinking = thinking_config(gemini_fake.last_body)
    assert "thinkingLevel" not in thinking and thinking["thinkingBudget"] > 0
    accepted(gemini_fake)


def test_1_gemini_2_5_pro_off_sends_its_minimum_budget_not_zero(gemini_fake):
    gemini_fake.push(Turn([Text("ok")]))
    result = chat("gemini", gemini_fake, "gemini-2.5-pro", opening(), thinking="off")
    assert result.stop_reason == "end_turn"
    assert thinking_config(gemini_fake.last_body) == {"thinkingBudget": 128}
    accepted(gemini_fake)


def test_1_gemini_3_gets_a_level(gemini_fake):
    gemini_fake.push(Turn([Text("ok")]), Turn([Text("ok")]))
    chat("gemini", gemini_fake, "gemini-3-pro-preview", opening(), thinking="high")
    assert thinking_config(gemini_fake.last_body) == {
        "includeThoughts": True,
        "thinkingLevel": "HIGH",
    }
    chat("gemini", gemini_fake, "gemini-3.8-flash", opening(), thinking="off")
    assert thinking_config(gemini_fake.last_body) == {"thinkingLevel": "MINIMAL"}
    accepted(gemini_fake)


# --- 2. Anthropic: adaptive thinking and effort, temperature only where accepted ---------------------------------


def test_2_anthropic_current_models_get_adaptive_thinking_and_effort(anthropic_fake):
    anthropic_fake.push(Turn([Think("hm"), Text("ok")]))
    result = chat("anthropic", anthropic_fake, "claude-opus-4-7", opening(), thinking="low")
    assert result.stop_reason == "end_turn"
    body = anthropic_fake.last_body
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "low"}
    accepted(anthropic_fake)


def test_2_anthropic_older_models_keep_the_budget_form(anthropic_fake):
    anthropic_fake.push(Turn([Think("hm"), Text("ok")]))
    chat("anthropic", anthropic_fake, "claude-haiku-4-5", opening(), thinking="medium")
    assert anthropic_fake.last_body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    accepted(anthropic_fake)


def test_2_anthropic_temperature_is_not_sent_where_it_is_deprecated(anthropic_fake):
    anthropic_fake.push(Turn([Text("ok")]), Turn([Text("ok")]))
    chat("anthropic", anthropic_fake, "claude-sonnet-5", opening(), temperature=0.3)
    assert "temperature" not in anthropic_fake.last_body
    chat("anthropic", anthropic_fake, "claude-sonnet-4-5", opening(), temperature=0.3)
    assert anthropic_fake.last_body["temperature"] == 0.3  # still honoured where the model takes it
    accepted(anthropic_fake)


# --- 3. OpenAI: a reasoning item is never stored without the item it produced ------------------------------------


@pytest.mark.parametrize(
    "parts", [[Think("plan"), Call("memory", '{"operation": "remem')], [Think("plan")]], ids=["cut-call", "cut-alone"]
)
def test_3_openai_max_tokens_cut_in_a_reasoning_turn_does_not_poison_the_conversation(openai_fake, parts):
    openai_fake.push(Turn(parts, stop="max_tokens"), Turn([Text("continuing")]))
    first = chat("openai", openai_fake, "gpt-5", opening(), thinking="low")
    assert first.stop_reason == "max_tokens"
    assert not any(b["type"] == "thinking" for b in first.message["blocks"])
    assert not any(i["type"] == "reasoning" for i in first.message["provider_state"]["openai"]["items"])
    messages = store_and_load([*opening(), first.message, text_message("user", "go on")])
    assert chat("openai", openai_fake, "gpt-5", messages, thinking="low").stop_reason == "end_turn"
    accepted(openai_fake)


# --- 4. OpenAI-compatible: arguments servers can parse, ids the validator accepts --------------------------------


def test_4_compatible_malformed_arguments_go_as_an_empty_object_with_a_note():
    with FakeChatCompletions(json_arguments=True) as fake:
        messages = [
            text_message("user", "remember tea"),
            {
                "role": "assistant",
                "blocks": [tool_call_block(id="call_bad", name="memory", arguments_raw='{"content": "tea')],
            },
            tool_result_message(tool_call_id="call_bad", name="memory", content="bad JSON", is_error=True),
        ]
        before = copy.deepcopy(messages)
        fake.push(Turn([Text("ok")]))
        chat("openai_compatible", fake, "qwen3", messages)
        assistant = fake.last_body["messages"][1]
        assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
        assert '{"content": "tea' in assistant["content"]  # the note quotes the raw arguments
        assert messages == before  # the stored wire keeps the original
        accepted(fake)


def test_4_compatible_tool_calls_without_an_id_get_a_stable_one():
    with FakeChatCompletions(omit_call_ids=True) as fake:
        fake.push(Turn([Call("memory", REMEMBER)]), Turn([Text("done")]))
        first = chat("openai_compatible", fake, "qwen3", opening())
        call = first.message["blocks"][-1]
        assert call["type"] == "tool_call" and call["id"].startswith("call_")
        messages = store_and_load([*opening(), first.message, *answer_calls(first.message)])
        validate_messages(messages)
        assert chat("openai_compatible", fake, "qwen3", messages).stop_reason == "end_turn"
        assert fake.last_body["messages"][-1]["tool_call_id"] == call["id"]
        accepted(fake)


# --- 5. OpenAI: encrypted reasoning for every model that can reason ----------------------------------------------


def test_5_openai_reasoning_model_missing_from_the_old_catalogue_gets_encrypted_reasoning(openai_fake):
    openai_fake.push(Turn([Think("plan"), Call("memory", REMEMBER)]), Turn([Text("noted")]))
    first = chat("openai", openai_fake, "gpt-6-astra", opening())
    assert openai_fake.last_body["include"] == ["reasoning.encrypted_content"]
    assert first.message["blocks"][0]["signature"]
    messages = store_and_load([*opening(), first.message, *answer_calls(first.message)])
    assert chat("openai", openai_fake, "gpt-6-astra", messages).stop_reason == "end_turn"
    accepted(openai_fake)


def test_5_openai_never_replays_a_reasoning_item_without_encrypted_content(openai_fake):
    # A turn stored by the old code: the reasoning item came back without encrypted_content.
    stored = {
        "role": "assistant",
        "blocks": [
            {"type": "thinking", "text": "plan", "signature": None, "provider": "openai"},
            {"type": "text", "text": "Hello."},
        ],
        "provider_state": {
            "openai": {
                "response_id": "resp_old",
                "items": [
                    {"id": "rs_old", "type": "reasoning", "summary": []},
                    {
                        "id": "msg_old",
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "Hello.", "annotations": []}],
                    },
                ],
            }
        },
    }
    openai_fake.push(Turn([Text("ok")]))
    chat("openai", openai_fake, "gpt-5", [*opening(), stored, text_message("user", "and?")])
    assert not [i for i in openai_fake.last_body["input"] if i.get("type") == "reasoning"]
    accepted(openai_fake)


# --- 6. Anthropic: one thinking configuration per assistant turn -------------------------------------------------


def test_6_anthropic_step_three_of_a_tool_loop_still_thinks(anthropic_fake):
    anthropic_fake.push(
        Turn([Think("plan"), Call("memory", REMEMBER)]),
        Turn([Call("memory", '{"operation": "recall", "query": "tea"}')]),  # no interleaved thinking
        Turn([Text("Done.")]),
    )
    messages = opening()
    for _ in range(2):
        result = chat("anthropic", anthropic_fake, "claude-sonnet-4-5", messages, thinking="low")
        messages = store_and_load([*messages, result.message, *answer_calls(result.message)])
    final = chat("anthropic", anthropic_fake, "claude-sonnet-4-5", messages, thinking="low")
    assert final.stop_reason == "end_turn"
    assert [("thinking" in r.body) for r in anthropic_fake.requests] == [True, True, True]
    accepted(anthropic_fake)


def test_6_a_turn_started_without_thinking_finishes_without_it(anthropic_fake):
    # The first step was made by another provider: the turn began without Anthropic thinking.
    messages = [
        *opening(),
        {"role": "assistant", "blocks": [tool_call_block(id="call_x", name="memory", arguments_raw=REMEMBER)]},
        tool_result_message(tool_call_id="call_x", name="memory", content="ok"),
    ]
    anthropic_fake.push(Turn([Text("Done.")]))
    chat("anthropic", anthropic_fake, "claude-sonnet-4-5", messages, thinking="low")
    assert "thinking" not in anthropic_fake.last_body
    accepted(anthropic_fake)


# --- 7. Gemini: the literal skip value; signatures bound to the model --------------------------------------------


def test_7_gemini_skip_signature_is_sent_as_the_literal_value(gemini_fake):
    messages = [
        *opening(),
        {"role": "assistant", "blocks": [tool_call_block(id="call_foreign", name="memory", arguments_raw=REMEMBER)]},
        tool_result_message(tool_call_id="call_foreign", name="memory", content="ok"),
    ]
    gemini_fake.push(Turn([Text("Done.")]))
    chat("gemini", gemini_fake, "gemini-2.5-pro", messages)
    model_turn = gemini_fake.last_body["contents"][1]
    assert model_turn["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"
    accepted(gemini_fake)


def test_7_gemini_model_switch_mid_turn_sends_no_signature_of_the_other_model(gemini_fake):
    gemini_fake.push(Turn([Think("plan", signature="c2lnbmVkdGhvdWdodA=="), Call("memory", REMEMBER)]))
    first = chat("gemini", gemini_fake, "gemini-2.5-pro", opening(), thinking="low")
    messages = store_and_load([*opening(), first.message, *answer_calls(first.message)])
    gemini_fake.push(Turn([Text("Done.")]))
    result = chat("gemini", gemini_fake, "gemini-3-pro-preview", messages, thinking="low")
    assert result.stop_reason == "end_turn"
    parts = gemini_fake.last_body["contents"][1]["parts"]
    assert not any(p.get("thought") for p in parts)
    assert [p.get("thoughtSignature") for p in parts if "functionCall" in p] == ["skip_thought_signature_validator"]
    accepted(gemini_fake)


# --- 8. Gemini: CONTINUATION is followed, not saved as a finished answer ------------------------------------------


def test_8_gemini_continuation_is_followed_and_merged(gemini_fake):
    gemini_fake.push(
        Turn([Text("The first half, ")], stop="continuation", input_tokens=30, output_tokens=10, reasoning_tokens=0),
        Turn([Text("and the second half.")], input_tokens=40, output_tokens=12, reasoning_tokens=0),
    )
    result = chat("gemini", gemini_fake, "gemini-2.5-flash", opening())
    assert result.stop_reason == "end_turn"
    assert result.message["blocks"] == [{"type": "text", "text": "The first half, and the second half."}]
    assert len(gemini_fake.requests) == 2 and gemini_fake.requests[1].body["continuationToken"]
    # Usage is cumulative within each response (the last chunk counts) and summed across the two requests.
    assert (result.usage.input_tokens, result.usage.output_tokens) == (70, 22)
    accepted(gemini_fake)


# --- 9. Chat Completions: alternating roles and DeepSeek-style reasoning replay ----------------------------------


def test_9_two_user_messages_in_a_row_are_merged_for_templates_that_alternate():
    with FakeChatCompletions(alternating_roles=True) as fake:
        messages = [
            text_message("system", "sys"),
            text_message("user", "[Summary of earlier conversation] tea is green"),
            text_message("user", "what colour is tea?"),
        ]
        fake.push(Turn([Text("green")]))
        assert chat("openai_compatible", fake, "mistral-small-3", messages).stop_reason == "end_turn"
        sent = fake.last_body["messages"]
        assert [m["role"] for m in sent] == ["system", "user"]
        assert sent[1]["content"].endswith("what colour is tea?")
        accepted(fake)


def test_9_deepseek_reasoning_is_passed_back_from_the_catalogue():
    with FakeChatCompletions(reasoning_replay=True) as fake:
        fake.push(Turn([Think("need memory"), Call("memory", REMEMBER)]), Turn([Text("done")]))
        first = chat("openai_compatible", fake, "deepseek-reasoner", opening())
        messages = store_and_load([*opening(), first.message, *answer_calls(first.message)])
        assert chat("openai_compatible", fake, "deepseek-reasoner", messages).stop_reason == "end_turn"
        assert fake.last_body["messages"][2]["reasoning_content"] == "need memory"
        accepted(fake)


# --- 10. Anthropic prompt caching ---------------------------------------------------------------------------------


def test_10_anthropic_requests_caching_and_reports_reads_and_writes_apart(anthropic_fake):
    anthropic_fake.push(Turn([Text("ok")], input_tokens=3000, cached_tokens=1000, cache_creation_tokens=1500))
    result = chat("anthropic", anthropic_fake, "claude-sonnet-4-5", opening())
    body = anthropic_fake.last_body
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert result.usage.input_tokens == 3000
    assert (result.usage.cached_tokens, result.usage.cache_creation_tokens) == (1000, 1500)
    assert result.message["usage"]["cache_creation_tokens"] == 1500
    accepted(anthropic_fake)


# --- 11. Anthropic: a Stop right after thinking stores no thinking-only message ----------------------------------


def test_11_stop_right_after_thinking_stores_no_thinking_only_message(anthropic_fake):
    anthropic_fake.push(Turn([Think("long plan"), Text("The answer.")], chunk_delay_s=0.05))
    stop = threading.Event()

    def on_event(event):
        if event["type"] == "thinking_end":
            stop.set()

    result = chat(
        "anthropic",
        anthropic_fake,
        "claude-sonnet-4-5",
        opening(),
        thinking="low",
        on_event=on_event,
        should_stop=stop.is_set,
    )
    assert result.stop_reason == "stopped"
    assert not any(b["type"] in ("thinking", "redacted_thinking") for b in result.message["blocks"])
    anthropic_fake.push(Turn([Text("ok")]))
    messages = store_and_load([*opening(), result.message, text_message("user", "well?")])
    assert chat("anthropic", anthropic_fake, "claude-sonnet-4-5", messages, thinking="low").stop_reason == "end_turn"
    accepted(anthropic_fake)


def test_11_a_stored_thinking_only_message_is_replayed_without_its_trailing_thinking(anthropic_fake):
    anthropic_fake.push(Turn([Think("plan"), Text("first")]))
    first = chat("anthropic", anthropic_fake, "claude-sonnet-4-5", opening(), thinking="low")
    thinking_only = {**first.message, "blocks": [first.message["blocks"][0]]}  # as the old code stored a Stop
    anthropic_fake.push(Turn([Text("ok")]))
    chat("anthropic", anthropic_fake, "claude-sonnet-4-5", [*opening(), thinking_only, text_message("user", "?")])
    accepted(anthropic_fake)
