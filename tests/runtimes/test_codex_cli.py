"""Codex CLI as an agent provider: the real bundled `codex` binary against the fake OpenAI Responses server."""

from __future__ import annotations

import pytest

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.models import RuntimeSessionBinding, UsageRecord
from conversations.store import conversation_key, load_conversation
from providers.wire import validate_messages
from tests.agents.factories import assistant_with
from tests.fakes.base import Text, Think, Turn
from tests.race import signal_after
from tests.runtimes.helpers import fire_in_background, process_group_gone
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _fire(workflow, generation, agent, prompt) -> Firing:
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt)
    )
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


def _codex_group(runtime_dir):
    """The pid (= process group) of the running codex whose CODEX_HOME is under `runtime_dir`, or None."""
    from pathlib import Path

    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"exec" in argv and any(str(runtime_dir).encode() in a and a.endswith(b"/cwd") for a in argv):
            return int(proc.name)
    return None


def _assert_group_gone(pid: int) -> None:
    wait_until(lambda: process_group_gone(pid), timeout=10, what="codex and everything it started to go")


def test_stop_mid_stream_kills_codex_and_saves_what_arrived(owner, openai_fake, runtime_dir):
    from agents.services.firings import firing_request_stop

    workflow, generation, ids = assistant_with(owner, provider="codex_cli", model="gpt-5")
    openai_fake.push(Turn([Think("Planning the story."), Text("Once upon a time")], pause_after_first_text_s=60))
    is_reasoning = lambda _collector, item: item.get("type") == "reasoning"  # noqa: E731
    with signal_after("providers.runtimes.codex_cli._Collector._item", when=is_reasoning) as reasoning_collected:
        background = fire_in_background(workflow, generation, ids["lead"], "tell me a long story")
        pid = wait_until(lambda: _codex_group(runtime_dir), what="codex to start")
        openai_fake.wait_until_silent()  # the reasoning went out whole, the text is stalled mid-stream
        assert reasoning_collected.wait(30), "codex never reported the completed reasoning item"
    firing = Firing.objects.get(workflow=workflow)
    assert firing_request_stop(firing_id=firing.pk)
    background.result(timeout=30)
    assert openai_fake.silent  # the firing ended while the provider was still silent: not after the fake's pause
    firing.refresh_from_db()
    assert firing.state == Firing.State.STOPPED, (firing.state, firing.error_code, firing.error_message)
    _assert_group_gone(pid)
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    validate_messages(stored)
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    blocks = stored[-1]["blocks"]
    assert blocks[-1]["stopped"] is True  # saved as a stopped answer, like any other provider's
    assert [b["text"] for b in blocks if b["type"] == "thinking"] == ["Planning the story."]  # what had arrived
    assert not list(runtime_dir.glob("codex_cli/*"))  # its CODEX_HOME and the conversation's directory are gone


def test_the_wall_clock_limit_kills_codex_and_keeps_what_arrived(owner, openai_fake, settings, runtime_dir):
    settings.AGENT_MAX_WALL_SECONDS = 6
    workflow, generation, ids = assistant_with(owner, provider="codex_cli", model="gpt-5")
    openai_fake.push(Turn([Think("Slowly."), Text("Slow start and then nothing")], pause_after_first_text_s=120))
    background = fire_in_background(workflow, generation, ids["lead"], "take your time")
    pid = wait_until(lambda: _codex_group(runtime_dir), what="codex to start")
    firing = Firing.objects.get(pk=background.result(timeout=60))
    _assert_group_gone(pid)
    assert firing.state in (Firing.State.STOPPED, Firing.State.FINISHED), (firing.error_code, firing.error_message)
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert stored[-1]["meta"]["runtime"]["end_reason"] == "max_wall_time"
    assert stored[-1]["blocks"][-1]["stopped"] is True
    assert not list(runtime_dir.glob("codex_cli/*"))


def test_a_command_codex_runs_is_a_chat_step_from_its_start_to_its_result():
    # The `codex exec --json` item events as documented (../shared/RUNTIMES.md): a command is announced by
    # item.started and completed with its output and exit code. Fed straight to the collector: the default agent
    # allows no shell, so the real CLI never runs one in these tests.
    from providers.runtimes.codex_cli import _Collector

    class Recorder:
        def __init__(self):
            self.emitted = []

        def emit(self, event):
            self.emitted.append(event)

    stream = Recorder()
    collector = _Collector(stream)
    item = {"id": "item_3", "type": "command_execution", "command": "ls", "status": "in_progress"}
    collector.add({"type": "item.started", "item": item})
    done = {**item, "status": "failed", "aggregated_output": "ls: cannot open\n", "exit_code": 2}
    collector.add({"type": "item.completed", "item": done})
    steps = [(e["phase"], e["tool_call"]["id"], e["result"]) for e in stream.emitted if e["type"] == "runtime_step"]
    assert steps[0] == ("started", "item_3", None)
    assert steps[-1] == ("finished", "item_3", {"is_error": True, "content": "ls: cannot open\n\n[exit code 2]"})
    first_call = stream.emitted[0]["tool_call"]
    assert first_call == {"id": "item_3", "name": "command_execution", "arguments": {"command": "ls"}}


def test_a_reconnect_notice_is_progress_and_the_paid_answer_is_kept(owner, openai_fake, runtime_dir):
    # The first stream dies before `response.completed` (the fake closes the connection, as a dropped provider
    # does). Codex retries it (`stream_max_retries`, default 5) and, in `exec --json`, reports the retry as a
    # top-level `error` event ("Reconnecting... 1/5 (stream disconnected ...)") before the answer and
    # `turn.completed`; only `turn.failed` is a failed turn.
    workflow, generation, ids = assistant_with(owner, provider="codex_cli", model="gpt-5")
    openai_fake.push(Turn([Text("Half an answer")], cut="text"), Turn([Text("The whole answer.")]))
    firing = _fire(workflow, generation, ids["lead"], "answer me")
    assert firing.final_text == "The whole answer."
    assert len([r for r in openai_fake.requests if r.path == "/v1/responses"]) == 2  # it did reconnect
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    validate_messages(stored)
    (notice,) = stored[-1]["meta"]["runtime"]["notices"]
    assert "Reconnecting" in notice
    (row,) = UsageRecord.objects.filter(provider="codex_cli")
    assert row.input_tokens == 21 and row.output_tokens == 13  # the answer's usage, billed


def test_reconnect_notices_are_chat_steps_and_only_turn_failed_fails():
    from providers.runtimes.codex_cli import _Collector

    class Recorder:
        def __init__(self):
            self.emitted = []

        def emit(self, event):
            self.emitted.append(event)

    stream = Recorder()
    collector = _Collector(stream)
    collector.add({"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion)"})
    assert collector.turn_failed is None
    (started, finished) = [e for e in stream.emitted if e["type"] == "runtime_step"]
    assert started["phase"] == "started" and finished["phase"] == "finished"
    assert "Reconnecting... 1/5" in finished["result"]["content"] and finished["result"]["is_error"] is False
    collector.add({"type": "turn.failed", "error": {"message": "stream disconnected: retries exhausted"}})
    assert collector.turn_failed == "stream disconnected: retries exhausted"
