"""Per-provider policies for what a stored wire cannot express there. Applied to the request only: the stored
list is compared before and after every call."""

import copy

import pytest

from providers.adapters import anthropic_messages, gemini, openai_compatible, openai_responses
from providers.adapters.common import malformed_arguments_note
from providers.wire import text_message, tool_call_block, tool_result_message
from tests.fakes import Text, Turn

from .loop import step

MALFORMED = '{"operation": "remember", "content": "tea'  # cut off mid-string, as a model might emit


def malformed_conversation(call_id: str = "call_bad_1") -> list[dict]:
    return [
        text_message("system", "sys"),
        text_message("user", "remember tea"),
        {
            "role": "assistant",
            "blocks": [
                {"type": "text", "text": "Saving."},
                tool_call_block(id=call_id, name="memory", arguments_raw=MALFORMED),
            ],
        },
        tool_result_message(
            tool_call_id=call_id, name="memory", content="arguments were not valid JSON", is_error=True
        ),
    ]


def test_malformed_arguments_are_parsed_once_and_kept_raw():
    block = malformed_conversation()[2]["blocks"][1]
    assert block["arguments"] is None and block["arguments_raw"] == MALFORMED
    assert block["parse_error"].startswith("invalid JSON")
    assert tool_call_block(id="x", name="n", arguments_raw="[1, 2]")["parse_error"].startswith("arguments must be")


def test_openai_sends_malformed_arguments_verbatim(openai_fake):
    messages = malformed_conversation()
    before = copy.deepcopy(messages)
    openai_fake.push(Turn([Text("ok")]))
    result = step("openai", openai_fake, messages)
    assert result.stop_reason == "end_turn"
    sent = openai_fake.last_body["input"]
    call = next(i for i in sent if i["type"] == "function_call")
    assert call == {"type": "function_call", "call_id": "call_bad_1", "name": "memory", "arguments": MALFORMED}
    assert next(i for i in sent if i["type"] == "function_call_output")["output"].startswith("[tool error] ")
    assert messages == before


def test_openai_compatible_sends_an_empty_object_and_a_note_with_the_raw_arguments(compat_fake):
    messages = malformed_conversation()
    before = copy.deepcopy(messages)
    compat_fake.push(Turn([Text("ok")]))
    step("openai_compatible", compat_fake, messages)
    assistant = compat_fake.last_body["messages"][2]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    assert assistant["content"] == "Saving.\n\n" + malformed_arguments_note(messages[2]["blocks"][1])
    assert messages == before


def test_anthropic_sends_empty_object_and_a_note_with_the_raw_arguments(anthropic_fake):
    messages = malformed_conversation()
    before = copy.deepcopy(messages)
    anthropic_fake.push(Turn([Text("ok")]))
    result = step("anthropic", anthropic_fake, messages)
    assert result.stop_reason == "end_turn"
    content = anthropic_fake.last_body["messages"][1]["content"]
    note = malformed_arguments_note(messages[2]["blocks"][1])
    assert content == [
        {"type": "text", "text": "Saving."},
        {"type": "text", "text": note},
        {"type": "tool_use", "id": "call_bad_1", "name": "memory", "input": {}},
    ]
    assert MALFORMED in note
    assert anthropic_fake.last_body["messages"][2]["content"][0]["is_error"] is True
    assert messages == before


def test_gemini_sends_empty_object_and_a_note_with_the_raw_arguments(gemini_fake):
    messages = malformed_conversation()
    before = copy.deepcopy(messages)
    gemini_fake.push(Turn([Text("ok")]))
    result = step("gemini", gemini_fake, messages)
    assert result.stop_reason == "end_turn"
    parts = gemini_fake.last_body["contents"][1]["parts"]
    assert parts[0] == {"text": "Saving."}
    assert parts[1] == {"text": malformed_arguments_note(messages[2]["blocks"][1])}
    assert parts[2]["functionCall"] == {"name": "memory", "args": {}, "id": "call_bad_1"}
    # The call was made elsewhere, so Gemini holds no signature for it: the documented skip value is sent.
    assert "thoughtSignature" in parts[2]
    assert gemini_fake.last_body["contents"][2]["parts"][0]["functionResponse"]["response"] == {
        "error": "arguments were not valid JSON"
    }
    assert messages == before


FOREIGN_THINKING = {"type": "thinking", "text": "secret plan", "signature": "sig-from-elsewhere", "provider": "other"}


@pytest.mark.parametrize(
    "build",
    [
        lambda m: openai_responses.build_input(m),
        lambda m: anthropic_messages.build_messages(m),
        lambda m: [c.model_dump(exclude_none=True) for c in gemini.build_contents(m)],
        lambda m: openai_compatible.build_messages(m, replay_reasoning=True),
    ],
    ids=["openai", "anthropic", "gemini", "openai_compatible"],
)
def test_thinking_from_another_provider_is_left_out(build):
    messages = [
        text_message("user", "hi"),
        {"role": "assistant", "blocks": [FOREIGN_THINKING, {"type": "text", "text": "hello"}]},
        text_message("user", "again"),
    ]
    before = copy.deepcopy(messages)
    sent = repr(build(messages))
    assert "secret plan" not in sent and "sig-from-elsewhere" not in sent
    assert "hello" in sent
    assert messages == before


IMAGE_DATA = "data:image/png;base64,iVBORw0KGgo="


@pytest.mark.parametrize(
    "build",
    [
        lambda m: openai_responses.build_input(m),
        lambda m: anthropic_messages.build_messages(m),
        lambda m: [c.model_dump(exclude_none=True, mode="json") for c in gemini.build_contents(m)],
        lambda m: openai_compatible.build_messages(m, replay_reasoning=False),
    ],
    ids=["openai", "anthropic", "gemini", "openai_compatible"],
)
def test_images_go_native_when_possible_else_as_a_text_placeholder(build):
    messages = [
        {
            "role": "user",
            "blocks": [
                {"type": "text", "text": "look"},
                {"type": "image", "ref": IMAGE_DATA, "media_type": "image/png"},
                {"type": "image", "ref": "blob:internal/42"},
            ],
        }
    ]
    sent = repr(build(messages))
    assert "[image blob:internal/42 omitted" in sent
    assert "iVBORw0KGgo" in sent or "image/png" in sent


def test_unknown_block_types_are_not_sent_but_kept():
    messages = [
        text_message("user", "hi"),
        {"role": "assistant", "blocks": [{"type": "hologram", "payload": {"x": 1}}, {"type": "text", "text": "ok"}]},
    ]
    before = copy.deepcopy(messages)
    assert "hologram" not in repr(openai_responses.build_input(messages))
    assert "hologram" not in repr(anthropic_messages.build_messages(messages))
    assert messages == before


def test_anthropic_tool_ids_from_other_providers_are_made_acceptable_and_stay_paired(anthropic_fake):
    messages = [
        text_message("user", "hi"),
        {"role": "assistant", "blocks": [tool_call_block(id="fc:1/a", name="memory", arguments_raw="{}")]},
        tool_result_message(tool_call_id="fc:1/a", name="memory", content="ok"),
    ]
    anthropic_fake.push(Turn([Text("ok")]))
    step("anthropic", anthropic_fake, messages)
    sent = anthropic_fake.last_body["messages"]
    assert sent[1]["content"][0]["id"] == "fc_1_a" == sent[2]["content"][0]["tool_use_id"]
