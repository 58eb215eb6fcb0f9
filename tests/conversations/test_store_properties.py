"""Property tests: whatever two lists are saved one after the other, the load returns the second exactly, on the warm
path (per-process copy) and the cold one (stored hashes), and the digest matches conversation_cursor."""

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.models import AgentConversation
from conversations.store import (
    conversation_cursor,
    conversation_key,
    forget_process_copies,
    load_conversation,
    load_conversation_snapshot,
    save_conversation,
    stored_cursor,
)
from providers.wire import tool_call_block, validate_messages

pytestmark = pytest.mark.django_db

_agents = itertools.count()
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@st.composite
def turns(draw):
    """One valid turn: a user message, then assistant messages with calls each answered in order."""
    messages = [{"role": "user", "blocks": [{"type": "text", "text": draw(text)}]}]
    for _ in range(draw(st.integers(0, 2))):
        blocks = []
        if draw(st.booleans()):
            blocks.append({"type": "thinking", "text": draw(text), "signature": draw(text), "provider": "anthropic"})
        if draw(st.booleans()):
            blocks.append({"type": "future_block", "payload": {"k": draw(text)}})  # a newer version's block
        calls = []
        for n in range(draw(st.integers(0, 2))):
            raw = draw(st.one_of(st.just('{"q": 1}'), text))  # malformed arguments_raw included
            call = tool_call_block(id=f"c{len(messages)}-{n}", name="memory", arguments_raw=raw)
            calls.append(call)
            blocks.append(call)
        if not blocks or draw(st.booleans()):
            blocks.append({"type": "text", "text": draw(text)})
        message = {"role": "assistant", "blocks": blocks}
        if draw(st.booleans()):
            message["provider_state"] = {"openai": {"encrypted_content": draw(text), "z": 1, "a": 2.5}}
        messages.append(message)
        for call in calls:
            messages.append(
                {"role": "tool", "blocks": [{"type": "tool_result", "tool_call_id": call["id"], "name": "memory",
                                             "content": draw(text), "is_error": draw(st.booleans())}]}
            )  # fmt: skip
    return messages


conversations = st.lists(turns(), max_size=4).map(lambda ts: [m for t in ts for m in t])


def _no_ts(messages):
    return [{k: v for k, v in m.items() if k != "ts"} for m in messages]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=conversations, second=conversations, shared=st.integers(0, 20), cold=st.booleans())
def test_the_second_save_is_what_loads(workflow, first, second, shared, cold):
    key = conversation_key(workflow.pk, 1, f"agent-{next(_agents)}")
    validate_messages(first)
    save_conversation(key, first)
    base = load_conversation_snapshot(key).messages
    if cold:
        forget_process_copies()
    # the second list shares a prefix with the first (as a continued, rewound or compacted conversation does)
    prefix = base[: min(shared, len(base))]
    while prefix and prefix[-1]["role"] != "assistant" and any(m["role"] == "tool" for m in second[:1]):
        prefix.pop()
    candidate = [*prefix, *second]
    try:
        validate_messages(candidate)
    except Exception:
        candidate = second
    save_conversation(key, candidate)

    loaded = load_conversation_snapshot(key).messages
    assert json.dumps(_no_ts(loaded)) == json.dumps(_no_ts(candidate))
    assert stored_cursor(key) == conversation_cursor(candidate)
    header = AgentConversation.objects.get(workflow=workflow, agent_node_id=key.agent_node_id)
    assert header.message_count == len(candidate)
    assert header.size_bytes == sum(
        len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()) for m in loaded
    )
    # Loading repairs, never rewrites: every stored message comes back in order, and what the repair adds is a
    # closing tool result (put right after the call it answers, which may be before later messages).
    repaired = iter(load_conversation(key))
    for stored in loaded:
        for message in repaired:
            if message == stored:
                break
            assert message["role"] == "tool" and message.get("meta", {}).get("closed_on_load")
        else:
            raise AssertionError("a stored message is missing from the loaded list")
