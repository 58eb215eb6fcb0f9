"""Property: any well-formed stored conversation (portable: no provider state) replays to every provider, and the
fake (which applies each provider's pairing rules) accepts it; the stored list is never modified."""

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.wire import text_message, tool_call_block, tool_result_message, validate_messages
from tests.fakes import Text, Turn

from .loop import step

words = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=20).filter(lambda t: t.strip())
arguments = st.one_of(
    st.dictionaries(st.sampled_from(["content", "query", "operation"]), words, max_size=2).map(json.dumps),
    st.sampled_from(['{"content": "cut', "[1]", "not json"]),
)


@st.composite
def conversations(draw):
    messages = [text_message("system", "sys")]
    counter = 0
    for _ in range(draw(st.integers(1, 4))):
        messages.append(text_message("user", draw(words)))
        for _ in range(draw(st.integers(0, 2))):  # tool steps within the turn
            calls = []
            blocks = [{"type": "text", "text": draw(words)}] if draw(st.booleans()) else []
            for _ in range(draw(st.integers(1, 3))):
                counter += 1
                calls.append(tool_call_block(id=f"call_{counter}", name="memory", arguments_raw=draw(arguments)))
            messages.append({"role": "assistant", "blocks": blocks + calls})
            for call in calls:
                messages.append(
                    tool_result_message(
                        tool_call_id=call["id"], name="memory", content=draw(words), is_error=draw(st.booleans())
                    )
                )
        if draw(st.booleans()):
            messages.append(text_message("assistant", draw(words)))
    if messages[-1]["role"] == "assistant":
        messages.append(text_message("user", draw(words)))
    return messages


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conversations())
def test_portable_conversations_replay_everywhere(openai_fake, anthropic_fake, gemini_fake, compat_fake, messages):
    validate_messages(messages)
    before = copy.deepcopy(messages)
    for provider, fake in (
        ("openai", openai_fake),
        ("anthropic", anthropic_fake),
        ("gemini", gemini_fake),
        ("openai_compatible", compat_fake),
    ):
        fake.push(Turn([Text("ok")]))
        result = step(provider, fake, messages)
        assert result.message["blocks"] == [{"type": "text", "text": "ok"}], provider
        assert not fake.rejections, (provider, fake.rejections)
    assert messages == before
