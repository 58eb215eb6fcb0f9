"""MessageWire: lossless round trips for every block type (hypothesis), validation errors that say what is wrong."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.wire import (
    MessageWire,
    WireError,
    text_of,
    tool_call_block,
    tool_calls_of,
    tool_result_message,
    validate_messages,
)

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=16)
# Raw argument strings: valid JSON objects, and anything else a model might emit (cut off, not an object, junk).
raw_arguments = st.one_of(
    json_objects.map(json.dumps),
    json_objects.map(lambda o: json.dumps(o)[:-1]),
    st.text(max_size=30),
    st.sampled_from(['{"a": 1', "[1, 2]", "null", "", '{"a": NaN}', '{"x": "\\ud800"}']),
)

text_blocks = st.builds(
    lambda text, stopped: {"type": "text", "text": text, **({"stopped": True} if stopped else {})},
    st.text(max_size=40),
    st.booleans(),
)
tool_call_blocks = st.builds(
    lambda i, n, raw: tool_call_block(id=i, name=n, arguments_raw=raw), ids, ids, raw_arguments
)
thinking_blocks = st.fixed_dictionaries(
    {
        "type": st.just("thinking"),
        "text": st.text(max_size=40),
        "signature": st.none() | st.text(min_size=1, max_size=40),
        "provider": st.sampled_from(["openai", "anthropic", "gemini", "openai_compatible"]),
    }
)
redacted_blocks = st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": st.text(max_size=40)})
image_blocks = st.fixed_dictionaries(
    {"type": st.just("image"), "ref": st.text(min_size=1, max_size=30)},
    optional={"media_type": st.sampled_from(["image/png", "image/jpeg"])},
)
file_blocks = st.fixed_dictionaries(
    {
        "type": st.just("file"),
        "sha256": st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
        "media_type": st.sampled_from(["image/png", "application/pdf", "text/csv"]),
        "name": st.text(min_size=1, max_size=30),
        "size": st.integers(0, 10**8),
    }
)
unknown_blocks = st.builds(
    lambda kind, extra: {**extra, "type": kind},
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12).filter(
        lambda k: k not in {"text", "tool_call", "tool_result", "thinking", "redacted_thinking", "image", "file"}
    ),
    json_objects,
)
tool_result_blocks = st.fixed_dictionaries(
    {
        "type": st.just("tool_result"),
        "tool_call_id": ids,
        "name": ids,
        "content": st.text(max_size=40),
        "is_error": st.booleans(),
    }
)
optional_fields = {
    "provider_state": json_objects,
    "usage": st.fixed_dictionaries(
        {k: st.integers(0, 10**6) for k in ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens")}
    ),
    "ts": st.text(max_size=30),
    "meta": json_objects,
}
assistant_messages = st.fixed_dictionaries(
    {
        "role": st.just("assistant"),
        "blocks": st.lists(
            text_blocks | tool_call_blocks | thinking_blocks | redacted_blocks | image_blocks | unknown_blocks,
            max_size=6,
        ),
    },
    optional=optional_fields,
)
other_messages = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user"]),
        "blocks": st.lists(text_blocks | image_blocks | file_blocks | unknown_blocks, max_size=4),
    },
    optional=optional_fields,
)
tool_messages = st.fixed_dictionaries(
    {"role": st.just("tool"), "blocks": st.lists(tool_result_blocks, min_size=1, max_size=1)},
    optional=optional_fields,
)


@settings(max_examples=300, deadline=None)
@given(assistant_messages | other_messages | tool_messages)
def test_every_message_round_trips_unchanged(message):
    assert MessageWire.from_dict(message).to_dict() == message
    # ...and through JSON, which is how the store keeps it.
    stored = json.loads(json.dumps(message))
    assert MessageWire.from_dict(stored).to_dict() == stored


@settings(max_examples=200, deadline=None)
@given(ids, ids, raw_arguments)
def test_arguments_raw_is_kept_byte_exact(call_id, name, raw):
    block = tool_call_block(id=call_id, name=name, arguments_raw=raw)
    message = {"role": "assistant", "blocks": [block]}
    loaded = json.loads(json.dumps(MessageWire.from_dict(message).to_dict()))
    assert loaded["blocks"][0]["arguments_raw"] == raw
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) or raw.strip() == "":
        assert block["arguments"] == (parsed or {}) and "parse_error" not in block
    else:
        assert block["arguments"] is None and block["parse_error"]


def test_unknown_block_types_and_keys_survive():
    message = {
        "role": "assistant",
        "blocks": [
            {"type": "audio", "ref": "blob:1", "seconds": 3.5, "nested": {"a": [1, None]}},
            {"type": "text", "text": "hi", "citations": [{"url": "x"}]},
        ],
        "future_field": {"kept": True},
    }
    wire = MessageWire.from_dict(message)
    assert wire.blocks[0].type == "audio"
    assert wire.to_dict() == message


def test_helpers():
    message = {
        "role": "assistant",
        "blocks": [
            {"type": "thinking", "text": "hidden", "signature": None, "provider": "gemini"},
            {"type": "text", "text": "Hello "},
            tool_call_block(id="c1", name="memory", arguments_raw='{"operation": "recall"}'),
            {"type": "text", "text": "world"},
        ],
    }
    assert text_of(message) == "Hello world"
    assert [c["id"] for c in tool_calls_of(message)] == ["c1"]


def valid_conversation():
    return [
        {"role": "system", "blocks": [{"type": "text", "text": "sys"}]},
        {"role": "user", "blocks": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "blocks": [
                tool_call_block(id="c1", name="memory", arguments_raw="{}"),
                tool_call_block(id="c2", name="todos", arguments_raw="{bad"),
            ],
        },
        tool_result_message(tool_call_id="c1", name="memory", content="ok"),
        tool_result_message(tool_call_id="c2", name="todos", content="bad args", is_error=True),
        {"role": "assistant", "blocks": [{"type": "text", "text": "done"}]},
    ]


def test_a_valid_conversation_validates():
    parsed = validate_messages(valid_conversation())
    assert [m.role for m in parsed] == ["system", "user", "assistant", "tool", "tool", "assistant"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda m: m.__setitem__(1, {"role": "robot", "blocks": []}), r"messages\[1\]: invalid message: role"),
        (lambda m: m[1].pop("blocks"), r"messages\[1\]: a message needs a 'blocks' list"),
        (
            lambda m: m[1]["blocks"].append({"text": "no type"}),
            r"messages\[1\]: a block needs a non-empty string 'type'",
        ),
        (lambda m: m[2]["blocks"][0].pop("arguments_raw"), r"messages\[2\]: invalid tool_call block: arguments_raw"),
        (lambda m: m[3]["blocks"][0].__setitem__("is_error", "no"), r"invalid tool_result block: is_error"),
        (lambda m: m[1]["blocks"].append(m[2]["blocks"][0]), r"a tool_call block cannot be in a user message"),
        (lambda m: m[3]["blocks"][0].__setitem__("tool_call_id", "zz"), r"'zz' does not answer a tool call"),
        (lambda m: m[3]["blocks"].append(m[4]["blocks"][0]), r"exactly one tool_result block"),
        (lambda m: m[2]["blocks"].append(m[2]["blocks"][0]), r"duplicate tool call id 'c1'"),
        (lambda m: m.__setitem__(0, "text"), r"messages\[0\]: a message must be an object"),
        (
            lambda m: m[1]["blocks"].append({"type": "file", "sha256": "ab", "media_type": "image/png", "name": "a"}),
            r"invalid file block: size",
        ),
    ],
)
def test_invalid_conversations_fail_with_a_clear_message(mutate, expected):
    messages = valid_conversation()
    mutate(messages)
    with pytest.raises(WireError, match=expected):
        validate_messages(messages)


def test_validate_refuses_a_non_list():
    with pytest.raises(WireError, match="messages must be a list"):
        validate_messages({"role": "user"})
