"""The offline provider: deterministic replies, tool commands, streaming with a delay, Stop, the call log."""

import threading
from types import SimpleNamespace

import pytest

from providers import ChatRequest, ChatUnifier, ToolDefinition, summarize
from providers.adapters import offline
from providers.wire import text_message, tool_calls_of, tool_result_message

MEMORY = ToolDefinition("memory", "memory tool", {"type": "object"})
TODOS = ToolDefinition("todos", "todo list", {"type": "object"})
RESEARCHER = ToolDefinition("researcher", "teammate", {"type": "object", "properties": {"task": {"type": "string"}}})


def chat(messages, tools=(MEMORY, TODOS, RESEARCHER), **kwargs):
    request = ChatRequest(provider="offline", model="offline-1", messages=list(messages), tools=list(tools))
    return ChatUnifier().chat(request, **kwargs)


def test_echo_states_how_many_earlier_messages_it_sees():
    messages = [
        text_message("system", "be brief"),
        text_message("user", "one"),
        text_message("assistant", "two"),
        text_message("user", "three"),
        text_message("assistant", "four"),
        text_message("user", "Hello there"),
    ]
    result = chat(messages)
    assert result.message["blocks"] == [{"type": "text", "text": "I see 4 earlier messages. You said: Hello there"}]
    assert result.stop_reason == "end_turn"
    assert chat([text_message("user", "hi")]).message["blocks"][0]["text"] == "I see 0 earlier messages. You said: hi"


def test_it_is_deterministic():
    messages = [text_message("user", "remember: the sky is blue\nTODO: buy milk")]
    assert chat(messages).message == chat(messages).message


@pytest.mark.parametrize(
    ("line", "name", "arguments"),
    [
        ("remember: tea is green", "memory", {"operation": "remember", "content": "tea is green"}),
        ("Recall: tea", "memory", {"operation": "recall", "query": "tea"}),
        ("TODO: buy milk", "todos", {"operation": "add", "text": "buy milk"}),
        ("ask researcher: find the capital of Peru", "researcher", {"task": "find the capital of Peru"}),
    ],
)
def test_each_command_calls_its_tool(line, name, arguments):
    result = chat([text_message("user", f"please\n{line}\nthanks")])
    [call] = tool_calls_of(result.message)
    assert call["name"] == name and call["arguments"] == arguments
    assert result.stop_reason == "tool_use"


def test_several_commands_make_calls_in_order():
    result = chat([text_message("user", "remember: a\ntodo: b\nask Researcher: c")])
    assert [c["name"] for c in tool_calls_of(result.message)] == ["memory", "todos", "researcher"]
    assert len({c["id"] for c in tool_calls_of(result.message)}) == 3


def test_only_the_last_user_message_counts():
    result = chat([text_message("user", "remember: old"), text_message("assistant", "ok"), text_message("user", "hi")])
    assert tool_calls_of(result.message) == []


def test_a_tool_that_is_not_offered_is_not_called():
    result = chat([text_message("user", "remember: x\nask bob: y")], tools=[TODOS])
    assert tool_calls_of(result.message) == []
    assert result.message["blocks"][0]["text"] == "I have no memory tool. I have no bob tool."


def test_after_tool_results_it_answers_mentioning_each_result():
    first = chat([text_message("user", "remember: tea\nask researcher: peru")])
    calls = tool_calls_of(first.message)
    messages = [
        text_message("user", "remember: tea\nask researcher: peru"),
        first.message,
        tool_result_message(tool_call_id=calls[0]["id"], name="memory", content="Remembered #12"),
        tool_result_message(tool_call_id=calls[1]["id"], name="researcher", content="Lima", is_error=False),
    ]
    final = chat(messages)
    text = final.message["blocks"][0]["text"]
    assert text == "Done. memory answered: Remembered #12. researcher answered: Lima."
    assert tool_calls_of(final.message) == [] and final.stop_reason == "end_turn"


def test_after_memory_results_it_answers_in_a_sentence_not_the_json():
    remembered = '{"item": {"id": 7, "title": "", "content": "tea is green", "version": 1, "tags": []}}'
    recalled = '{"items": [{"id": 7, "content": "tea is green"}, {"id": 8, "content": "milk"}], "search": "fts"}'
    refused = '{"error": {"code": "not_found", "message": "That memory does not exist.", "hint": "recall"}}'
    first = chat([text_message("user", "remember: tea is green\nrecall: tea\nrecall: x")])
    calls = tool_calls_of(first.message)
    messages = [
        text_message("user", "remember: tea is green\nrecall: tea\nrecall: x"),
        first.message,
        tool_result_message(tool_call_id=calls[0]["id"], name="memory", content=remembered),
        tool_result_message(tool_call_id=calls[1]["id"], name="memory", content=recalled),
        tool_result_message(tool_call_id=calls[2]["id"], name="memory", content=refused, is_error=True),
    ]
    text = chat(messages).message["blocks"][0]["text"]
    assert text == (
        "Done. Saved to memory as #7 (version 1): tea is green. I found 2 memories: tea is green; milk. "
        "The memory tool refused: That memory does not exist."
    )
    assert "{" not in text


def test_notes_ahead_of_the_message_are_counted_never_echoed():
    said = '[feedback]{"answer": "I see 0", "rating": "good"}[/feedback]\n[memory]{"memory_id": 3}[/memory]\n\nhello'
    text = chat([text_message("user", said)]).message["blocks"][0]["text"]
    assert text == "(2 notes from OpenCompany: feedback, memory.) I see 0 earlier messages. You said: hello"
    assert "[feedback]" not in text and "rating" not in text
    # A bracketed line the owner wrote after their own words is theirs, and echoed as typed.
    mine = chat([text_message("user", 'hi\n[feedback]{"x": 1}[/feedback]')]).message["blocks"][0]["text"]
    assert mine.endswith('You said: hi\n[feedback]{"x": 1}[/feedback]')


def test_it_streams_in_chunks_with_the_configured_delay(monkeypatch):
    monkeypatch.setenv("OFFLINE_PROVIDER_DELAY_MS", "30")
    timeline = []  # what happened, in order: each delta, and each pause the provider took between them
    monkeypatch.setattr(offline, "time", SimpleNamespace(sleep=lambda seconds: timeline.append(("pause", seconds))))

    def on_event(event):
        timeline.append((event["type"], event.get("text")))

    result = chat([text_message("user", "one two three four five six seven eight nine")], on_event=on_event)
    deltas = [text for kind, text in timeline if kind == "text_delta"]
    assert len(deltas) > 3
    assert "".join(deltas) == result.message["blocks"][0]["text"]
    # The configured pause stands between every two deltas, and nowhere else.
    expected = [("text_delta", deltas[0])]
    for delta in deltas[1:]:
        expected += [("pause", 0.03), ("text_delta", delta)]
    assert timeline == expected


def test_stop_between_chunks_keeps_what_was_streamed(monkeypatch):
    monkeypatch.setenv("OFFLINE_PROVIDER_DELAY_MS", "20")
    stop = threading.Event()
    events = []

    def on_event(event):
        events.append(event)
        if len(events) == 2:
            stop.set()

    result = chat([text_message("user", "word " * 30)], on_event=on_event, should_stop=stop.is_set)
    assert result.stop_reason == "stopped"
    [block] = result.message["blocks"]
    assert block["stopped"] is True
    assert block["text"] == "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert len(events) == 2 and block["text"].startswith("I see 0 earlier messages.")


def test_stop_before_tool_calls_drops_them():
    calls = {"n": 0}

    def should_stop():
        calls["n"] += 1
        return calls["n"] > 1  # the text's single chunk goes out, then Stop

    result = chat([text_message("user", "todo: x")], should_stop=should_stop)
    assert result.stop_reason == "stopped"
    assert tool_calls_of(result.message) == []


def test_every_call_is_logged_durably(tmp_path, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("OPENCOMPANY_OFFLINE_CALL_LOG", str(log))
    chat([text_message("user", "a")])
    chat([text_message("user", "b")])
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("offline-1 ") for line in lines)


def test_offline_summary_is_deterministic_and_mentions_the_turns():
    messages = [
        text_message("system", "sys"),
        text_message("user", "My name is Ada."),
        text_message("assistant", "Hello Ada."),
    ]
    first = summarize(provider="offline", model="offline-1", messages=messages)
    assert first == summarize(provider="offline", model="offline-1", messages=messages)
    assert "My name is Ada." in first and "Hello Ada." in first and "sys" not in first.split(":", 1)[1]


def test_usage_is_reported():
    result = chat([text_message("user", "hello")])
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.message["usage"] == result.usage.to_dict()
