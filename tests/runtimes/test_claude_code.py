"""Claude Code as an agent provider: the real bundled CLI against the fake Anthropic Messages server."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.models import RuntimeSessionBinding, UsageRecord
from conversations.store import clear_conversation, conversation_key, load_conversation
from tests.agents.factories import assistant_with
from tests.fakes.base import Call, Text, Think, Turn
from tests.race import Competitor, signal_after
from tests.runtimes.helpers import fire_in_background, process_group_gone
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MODEL = "claude-sonnet-4-5"
CAT = "The cat is Miso."


def _claude_agent(owner, **kwargs):
    return assistant_with(owner, provider="claude_code", model=MODEL, **kwargs)


def _fire(workflow, generation, agent, prompt) -> Firing:
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt)
    )
    assert firing.state in (Firing.State.FINISHED, Firing.State.STOPPED), (firing.error_code, firing.error_message)
    return firing


def _texts(message: dict) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if b.get("type") == "text"]


def _binding(workflow, generation, agent) -> RuntimeSessionBinding:
    return RuntimeSessionBinding.objects.get(workflow=workflow, generation=generation, agent_node_id=agent)


def test_two_firings_resume_one_session_and_the_second_request_carries_the_first_turn(owner, anthropic_fake):
    workflow, generation, ids = _claude_agent(owner)
    anthropic_fake.push(Turn([Think("The owner greets me."), Text("Hello, I am Lead.")]))
    first = _fire(workflow, generation, ids["lead"], "hi there")
    assert first.final_text == "Hello, I am Lead."
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    thinking, text = stored[-1]["blocks"]
    assert thinking["type"] == "thinking" and thinking["text"] == "The owner greets me." and thinking["signature"]
    assert text == {"type": "text", "text": "Hello, I am Lead."}
    binding = _binding(workflow, generation, ids["lead"])
    session = binding.session_id
    assert stored[-1]["meta"]["runtime"] == {"runtime": "claude_code", "session_id": session, "resumed": False}
    assert Path(binding.transcript_path).is_file()
    assert binding.cursor_length == 3
    # The system prompt reaches Claude Code as its system prompt.
    system = json.dumps(anthropic_fake.requests[-1].body["system"])
    assert "You are Lead." in system
    assert anthropic_fake.requests[-1].query == {"beta": ["true"]}

    anthropic_fake.push(Turn([Text("You said hi there.")]))
    second = _fire(workflow, generation, ids["lead"], "what did I say?")
    assert second.final_text == "You said hi there."
    body = anthropic_fake.requests[-1].body
    texts = [(m["role"], t) for m in body["messages"] for t in _texts(m)]
    assert ("user", "hi there") in texts  # the first turn, from the resumed session
    assert ("assistant", "Hello, I am Lead.") in texts
    assert texts[-1] == ("user", "what did I say?")
    assert not any("<transcript>" in t for _, t in texts)  # resumed, not handed a portable transcript
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "user", "assistant"]
    assert stored[-1]["meta"]["runtime"]["resumed"] is True
    assert stored[-1]["meta"]["runtime"]["session_id"] == session
    assert _binding(workflow, generation, ids["lead"]).session_id == session
    assert _binding(workflow, generation, ids["lead"]).cursor_length == 5


def test_a_lost_transcript_starts_a_new_session_from_the_record_and_says_so(owner, anthropic_fake):
    workflow, generation, ids = _claude_agent(owner)
    anthropic_fake.push(Turn([Text("The code word is heron.")]))
    _fire(workflow, generation, ids["lead"], "remember the code word heron")
    old = _binding(workflow, generation, ids["lead"])
    Path(old.transcript_path).unlink()  # another worker, a cleaned disk

    anthropic_fake.push(Turn([Text("It was heron.")]))
    second = _fire(workflow, generation, ids["lead"], "what was the code word?")
    assert second.final_text == "It was heron."
    request_text = "\n".join(t for m in anthropic_fake.requests[-1].body["messages"] for t in _texts(m))
    assert "<transcript>" in request_text and "[user] remember the code word heron" in request_text
    assert "[assistant] The code word is heron." in request_text
    assert "could not be resumed" in request_text
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    runtime = stored[-1]["meta"]["runtime"]
    assert runtime["resumed"] is False and runtime["session_id"] != old.session_id
    assert "could not be resumed" in runtime["note"] and old.session_id in runtime["note"]
    new = _binding(workflow, generation, ids["lead"])
    assert new.session_id == runtime["session_id"] and Path(new.transcript_path).is_file()
    assert new.cursor_length == 5


def test_clear_context_drops_the_binding(owner, anthropic_fake):
    workflow, generation, ids = _claude_agent(owner)
    anthropic_fake.push(Turn([Text("Noted.")]))
    _fire(workflow, generation, ids["lead"], "note this")
    assert RuntimeSessionBinding.objects.filter(workflow=workflow).exists()
    clear_conversation(workflow, generation, ids["lead"])
    assert not RuntimeSessionBinding.objects.filter(workflow=workflow).exists()
    anthropic_fake.push(Turn([Text("Fresh start.")]))
    _fire(workflow, generation, ids["lead"], "hello again")
    texts = [t for m in anthropic_fake.requests[-1].body["messages"] for t in _texts(m)]
    assert not any("note this" in t for t in texts)  # the new session knows nothing of the cleared turn


def test_cost_follows_the_clis_own_reported_totals_across_resume(owner, anthropic_fake):
    # What the CLI itself reports (`total_cost_usd` on its result message, cumulative over the resumed session) is
    # observed as it arrives, before any arithmetic of ours; each firing's row must be that total's increase, and
    # the totals must be genai-prices' published price of the calls made.
    from claude_agent_sdk import ResultMessage
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    reported: list[float] = []

    def observe(_collector, item) -> bool:
        if isinstance(item, ResultMessage):
            reported.append(item.total_cost_usd)
        return False

    def price(input_tokens, cached, output) -> Decimal:
        usage = PriceUsage(input_tokens=input_tokens, cache_read_tokens=cached, output_tokens=output)
        return Decimal(calc_price(usage, model_ref=MODEL, provider_id="anthropic").total_price)

    workflow, generation, ids = _claude_agent(owner)
    with signal_after("providers.runtimes.claude_code.collector.Collector.add", when=observe):
        anthropic_fake.push(Turn([Text("One.")], input_tokens=60_000, cached_tokens=10_000, output_tokens=3_000))
        _fire(workflow, generation, ids["lead"], "count")
        anthropic_fake.push(Turn([Text("Two.")], input_tokens=80_000, cached_tokens=50_000, output_tokens=1_000))
        _fire(workflow, generation, ids["lead"], "again")
    assert _binding(workflow, generation, ids["lead"]) is not None  # the second firing resumed the session
    first, second = (Decimal(str(total)) for total in reported)
    rows = list(UsageRecord.objects.filter(workflow_id=workflow.pk, provider="claude_code").order_by("id"))
    assert len(rows) == 2
    assert rows[0].cost == pytest.approx(first, abs=Decimal("0.000002"))
    assert rows[1].cost == pytest.approx(second - first, abs=Decimal("0.000002"))
    one, two = price(60_000, 10_000, 3_000), price(80_000, 50_000, 1_000)
    assert first == pytest.approx(one, abs=Decimal("0.000002"))
    assert second == pytest.approx(one + two, abs=Decimal("0.000002"))


def test_a_memory_call_from_claude_code_lands_in_the_agents_memory_namespace(owner, anthropic_fake):
    from memory.models import MemoryItem

    workflow, generation, ids = _claude_agent(owner, memory=True)
    anthropic_fake.push(
        # Claude Code asks for thinking, so the API requires the tool-calling turn to start with a thinking block.
        Turn([Think("Store it."), Call("mcp__project__memory", json.dumps({"operation": "remember", "content": CAT}))]),
        Turn([Text("Remembered.")]),
    )
    firing = _fire(workflow, generation, ids["lead"], "remember my cat is Miso")
    assert firing.final_text == "Remembered."
    first_request = anthropic_fake.requests[0].body
    offered = [t["name"] for t in first_request.get("tools", [])]
    assert offered == ["mcp__project__memory"]  # no built-in tool at all by default
    items = list(MemoryItem.objects.all())
    assert [i.content for i in items] == ["The cat is Miso."]
    assert items[0].namespace.workflow_id == workflow.pk and items[0].namespace.node_id == ids["mem"]
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    result = stored[3]["blocks"][0]
    assert result["name"] == "mcp__project__memory" and not result["is_error"]
    assert [b["type"] for b in stored[2]["blocks"]] == ["thinking", "tool_call"]


def test_stop_mid_stream_kills_the_process_and_saves_the_partial_answer(owner, anthropic_fake, runtime_dir, caplog):
    import logging

    from agents.services.firings import firing_request_stop

    caplog.set_level(logging.DEBUG)

    workflow, generation, ids = _claude_agent(owner)
    anthropic_fake.push(Turn([Text("The first half, then a long silence")], pause_after_first_text_s=60))
    is_text = lambda _stream, event: event.get("type") == "text_delta"  # noqa: E731
    with signal_after("providers.adapters.common.Stream.emit", when=is_text) as text_arrived:
        background = fire_in_background(workflow, generation, ids["lead"], "tell me a long story")
        firing = wait_until(lambda: Firing.objects.filter(workflow=workflow).first(), what="the firing")
        pid_file = wait_until(lambda: next(runtime_dir.glob("claude_code/*/proc/pid"), None), what="the CLI's pid")
        pid = int(wait_until(lambda: pid_file.read_text().strip(), what="the CLI's pid"))
        anthropic_fake.wait_until_silent()  # the first text delta went out, the rest is held back
        assert text_arrived.wait(30), "the first text delta never reached the runtime"
    assert firing_request_stop(firing_id=firing.pk)
    background.result(timeout=30)
    assert anthropic_fake.silent  # the firing ended while the provider was still silent: it did not wait for it
    firing.refresh_from_db()
    assert firing.state == Firing.State.STOPPED, (firing.state, firing.error_code, firing.error_message)
    wait_until(lambda: process_group_gone(pid), timeout=10, what="the CLI's process group to go")
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    (partial,) = stored[-1]["blocks"]
    assert partial["stopped"] is True and partial["text"] and "The first half".startswith(partial["text"][:5])
    assert firing.final_text == partial["text"]
    # A stop is an expected end: the SDK's "Fatal error in message reader" is logged, but not as an error.
    errors = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    reader = [r for r in caplog.records if "Fatal error in message reader" in r.getMessage()]
    assert all(r.levelno == logging.DEBUG and "expected: the run was stopped" in r.getMessage() for r in reader)
    # The killed session is not resumed, so nothing of its directory is kept.
    assert not list(runtime_dir.glob("claude_code/*"))
    # No result message, so no usage and no cost came, but the model was called: estimated, marked so.
    (row,) = UsageRecord.objects.filter(provider="claude_code")
    assert row.meta.get("estimated") is True
    assert row.input_tokens > 0 and row.output_tokens > 0 and row.cost > 0


def test_the_default_configuration_offers_no_builtin_tool_and_a_bash_call_is_refused(owner, anthropic_fake, tmp_path):
    # Memory wired, so the request defines a tool (the API refuses tool blocks in a request without tools); the
    # model asks for Bash anyway, which was never offered.
    workflow, generation, ids = _claude_agent(owner, memory=True)
    marker = tmp_path / "bash-ran"
    anthropic_fake.push(
        Turn([Think("Run it."), Call("Bash", json.dumps({"command": f"touch {marker}", "description": "touch"}))]),
        Turn([Text("I could not run that.")]),
    )
    firing = _fire(workflow, generation, ids["lead"], "run touch")
    assert firing.final_text == "I could not run that."
    offered = [t["name"] for t in anthropic_fake.requests[0].body.get("tools", [])]
    assert offered == ["mcp__project__memory"]
    assert not marker.exists()
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    result = stored[3]["blocks"][0]
    assert result["name"] == "Bash" and result["is_error"] is True


def test_an_allowlisted_builtin_tool_is_offered_and_nothing_else(owner, anthropic_fake):
    workflow, generation, ids = _claude_agent(owner, runtime_tools=["Read"])
    anthropic_fake.push(Turn([Text("Ready.")]))
    _fire(workflow, generation, ids["lead"], "hello")
    offered = [t["name"] for t in anthropic_fake.requests[0].body.get("tools", [])]
    assert offered == ["Read"]


def test_the_api_shows_each_agents_fidelity_and_the_session_binding(owner, owner_client, anthropic_fake):
    from django.urls import reverse

    workflow, generation, ids = _claude_agent(owner)
    url = reverse("conversations-api-detail", args=[workflow.pk, ids["lead"]])
    before = owner_client.get(url).json()["runtime"]
    assert before["provider"] == "claude_code"
    assert before["fidelity"]["label"] == "exact observable stream plus explicit session binding"
    assert before["session"] is None
    anthropic_fake.push(Turn([Text("Hello.")]))
    _fire(workflow, generation, ids["lead"], "hi")
    after = owner_client.get(url).json()["runtime"]
    binding = _binding(workflow, generation, ids["lead"])
    assert after["session"]["session_id"] == binding.session_id
    assert after["session"]["transcript_path"] == binding.transcript_path

    codex_workflow, _, codex_ids = assistant_with(owner, provider="codex_cli", model="gpt-5")
    codex = owner_client.get(reverse("conversations-api-detail", args=[codex_workflow.pk, codex_ids["lead"]])).json()
    assert codex["runtime"]["fidelity"]["label"] == "observable-only, non-resumable"
    assert codex["runtime"]["session"] is None


def test_the_agent_form_schema_names_each_runtimes_fidelity():
    from workflows.nodes.builtin import AgentParams

    schema = AgentParams.model_json_schema()
    provider = schema["properties"]["provider"]
    assert {"claude_code", "codex_cli"} <= set(provider["enum"])
    # In an owner's words (issue 33); the Context panel names the exact fidelity labels.
    assert "Claude Code keeps everything it shows and resumes its own session" in provider["description"]
    assert "Codex CLI and RLM keep what they show, each answer starting afresh" in provider["description"]
    assert schema["properties"]["runtime_tools"]["default"] == []


def test_a_chat_with_claude_code_streams_stops_and_continues(owner, anthropic_fake, settings):
    from chat.models import ChatRun
    from chat.run_stream import run_stream_state
    from chat.services import chat_message_send, chat_run_stop

    settings.AGENT_STOP_POLL_SECONDS = 0.02
    workflow, generation, ids = _claude_agent(owner)
    words = "".join(f"part{i} " for i in range(80))
    anthropic_fake.push(Turn([Text(words)], chunk_delay_s=0.0, pause_after_first_text_s=60))
    sender = Competitor(lambda: chat_message_send(workflow=workflow, text="a long answer please"), name="send").start()
    run_id = wait_until(lambda: ChatRun.objects.values_list("pk", flat=True).first(), what="the run")
    wait_until(lambda: len(run_stream_state(run_id)[1]) > 0, what="streamed text", timeout=60)
    streamed = run_stream_state(run_id)[1]
    assert words.startswith(streamed)  # the chat saw Claude Code's text deltas as they came
    chat_run_stop(workflow=workflow, run_id=run_id)
    sender.result(timeout=60)
    run = ChatRun.objects.get(pk=run_id)
    assert run.state == "stopped" and run.reply_message.status == "stopped"
    assert run.reply_message.text and words.startswith(run.reply_message.text)
    assert not RuntimeSessionBinding.objects.filter(workflow=workflow).exists()  # a killed session is not resumed

    anthropic_fake.push(Turn([Text("Continuing.")]))
    _, second, _ = chat_message_send(workflow=workflow, text="go on")
    second.refresh_from_db()
    assert second.state == "finished", (second.error_code, second.error_message)
    assert second.reply_message.text == "Continuing."
    request_text = "\n".join(t for m in anthropic_fake.requests[-1].body["messages"] for t in _texts(m))
    assert f"[assistant] {run.reply_message.text}" in request_text  # handed the stopped answer from the record
    assert not anthropic_fake.rejections


def test_the_wall_clock_limit_kills_the_run_and_keeps_what_arrived(owner, anthropic_fake, settings, runtime_dir):

    settings.AGENT_MAX_WALL_SECONDS = 6
    workflow, generation, ids = _claude_agent(owner)
    anthropic_fake.push(Turn([Text("Slow start and then nothing")], pause_after_first_text_s=120))
    background = fire_in_background(workflow, generation, ids["lead"], "take your time")
    # The pid while the CLI runs: its directory is removed once the firing ends.
    pid_file = wait_until(lambda: next(runtime_dir.glob("claude_code/*/proc/pid"), None), what="the CLI's pid")
    pid = int(wait_until(lambda: pid_file.read_text().strip(), what="the CLI's pid"))
    firing = Firing.objects.get(pk=background.result(timeout=60))
    wait_until(lambda: process_group_gone(pid), timeout=10, what="the CLI's process group to go")
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert stored[-1]["meta"]["runtime"]["end_reason"] == "max_wall_time"
    assert stored[-1]["blocks"][0]["stopped"] is True and stored[-1]["blocks"][0]["text"]
    assert firing.state in (Firing.State.STOPPED, Firing.State.FINISHED)


def test_a_teammate_asked_from_claude_code_answers_within_the_run(owner, anthropic_fake):
    """A teammate is an MCP tool like memory: its firing runs to its end while the CLI waits, as a child of the
    lead's firing, and its answer (uncut) is the tool result the run continues with."""
    from tests.agents.factories import agent_node, edge, started_workflow
    from workflows.nodes.registry import get_node_spec

    alice = agent_node("alice", "Alice")  # the offline provider: it answers "... You said: <task>"
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Lead", provider="claude_code", model=MODEL),
        alice,
        {"id": "c1", "type": "context", "params": {}},
        {"id": "c2", "type": "context", "params": {}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("alice", "output-tool", "lead", "input-tools"),
        edge("c1", "output-context", "lead", "input-context"),
        edge("c2", "output-context", "alice", "input-context"),
    ]
    workflow, generation, ids = started_workflow(owner, nodes, edges)
    tool = f"mcp__project__{get_node_spec('agent').tool_name_for(alice)}"
    anthropic_fake.push(
        Turn([Think("Ask Alice."), Call(tool, json.dumps({"task": "count the sheep"}))]),
        Turn([Text("Alice counted them.")]),
    )
    lead = _fire(workflow, generation, ids["lead"], "how many sheep?")
    assert lead.final_text == "Alice counted them."
    assert [t["name"] for t in anthropic_fake.requests[0].body.get("tools", [])] == [tool]
    child = Firing.objects.get(parent=lead)
    assert child.state == Firing.State.FINISHED and child.agent_node_id == ids["alice"]
    assert child.delegation_chain == [ids["lead"], ids["alice"]] and child.depth == 1
    assert "count the sheep" in child.final_text
    alice_stored = load_conversation(conversation_key(workflow.pk, generation, ids["alice"]))
    assert [m["role"] for m in alice_stored] == ["system", "user", "assistant"]
    assert alice_stored[1]["blocks"][0]["text"] == "count the sheep"
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    result = stored[3]["blocks"][0]
    assert result["name"] == tool and not result["is_error"]
    assert child.final_text in result["content"]  # the teammate's answer reached the run as its tool result
    # What the CLI sent the model next carries that answer too.
    follow_up = json.dumps(anthropic_fake.requests[1].body)
    assert "count the sheep" in follow_up


def test_claude_code_s_tool_calls_are_steps_of_the_chat_run_named_as_the_agent_knows_them(owner, anthropic_fake):
    from chat.models import ChatRunStep
    from chat.services import chat_message_send

    workflow, generation, ids = _claude_agent(owner, memory=True)
    anthropic_fake.push(
        Turn([Think("Store it."), Call("mcp__project__memory", json.dumps({"operation": "remember", "content": CAT}))]),
        Turn([Text("Remembered.")]),
    )
    _, run, _ = chat_message_send(workflow=workflow, text="remember my cat is Miso")
    [step] = ChatRunStep.objects.filter(run=run)
    assert (step.name, step.state, step.is_error) == ("memory", "finished", False)
    assert step.arguments == {"operation": "remember", "content": CAT}
    assert "Miso" in step.result
    # The stored conversation keeps the name as Claude Code used it.
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert stored[2]["blocks"][-1]["name"] == "mcp__project__memory"
