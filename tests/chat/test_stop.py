"""Stop mid-answer: the partial text is kept as a stopped reply, and the next message's firing sends a
conversation the provider accepts — through a real worker (offline provider) and through each provider's real
SDK against its local fake server."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from agents.models import Firing
from chat.models import ChatRun
from chat.run_stream import run_stream_state
from chat.services import chat_message_send, chat_run_stop
from providers.wire import validate_messages
from tests.agents.factories import agent_node, edge, started_workflow
from tests.chat.helpers import chat_workflow, stored, texts, wait_until
from tests.fakes import Call, FakeAnthropic, FakeChatCompletions, FakeGemini, FakeOpenAIResponses, Text, Turn
from tests.processes import start_celery_worker

pytestmark = pytest.mark.django_db(transaction=True)

LONG = " ".join(f"word{i}" for i in range(120))


def assert_stopped_turn(workflow, generation, agent, run: ChatRun, partial: str):
    reply = run.reply_message
    assert run.state == "stopped" and run.outcome == "stopped"
    assert reply.status == "stopped" and reply.text and partial.startswith(reply.text[:10])
    conversation = stored(workflow, generation, agent)
    at = max(i for i, m in enumerate(conversation) if m["role"] == "assistant")
    last, after = conversation[at], conversation[at + 1 :]
    (block,) = [b for b in last["blocks"] if b["type"] == "text"]
    assert block["text"] == reply.text
    # A text cut mid-way is marked; one the provider had already completed (OpenAI items) is kept as sent.
    assert block.get("stopped") is True or block["text"] == partial
    calls = [b for b in last["blocks"] if b["type"] == "tool_call"]
    # Stop after the call arrived: the tool never ran and its answer says so; no call is left open.
    results = [b for m in after for b in m["blocks"] if b["type"] == "tool_result"]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert all(r["content"] == "Not run: the owner stopped this answer." for r in results)


@pytest.mark.slow
def test_stop_on_a_real_worker_keeps_the_partial_answer_and_the_next_message_continues(owner, tmp_path, settings):
    settings.AGENT_EXECUTION_MODE = "celery"
    worker = start_celery_worker(tmp_path, OFFLINE_PROVIDER_DELAY_MS="60", AGENT_STOP_POLL_SECONDS="0.05")
    try:
        workflow, generation, ids = chat_workflow(owner, memory=True)
        _, run, _ = chat_message_send(workflow=workflow, text=LONG)
        wait_until(lambda: len(run_stream_state(run.pk)[1]) > 20, timeout=60, what="some streamed text")
        assert ChatRun.objects.get(pk=run.pk).state == "running"
        chat_run_stop(workflow=workflow, run_id=run.pk)
        assert ChatRun.objects.get(pk=run.pk).state in ("stopping", "stopped")
        run = wait_until(lambda: (r := ChatRun.objects.get(pk=run.pk)).state == "stopped" and r, timeout=30,
                         what="the run to stop")  # fmt: skip
        assert_stopped_turn(workflow, generation, ids["lead"], run, "I see 0 earlier messages. You said: " + LONG)
        assert Firing.objects.get(pk=run.firing_id).state == "stopped"

        _, second, _ = chat_message_send(workflow=workflow, text="go on")
        second = wait_until(lambda: (r := ChatRun.objects.get(pk=second.pk)).state == "finished" and r, timeout=60,
                            what="the next answer")  # fmt: skip
        sent = stored(workflow, generation, ids["lead"])
        validate_messages(sent)
        assert texts(sent)[-1] == "I see 2 earlier messages. You said: go on"
    finally:
        worker.stop()


FAKES = {
    "openai": (FakeOpenAIResponses, "gpt-5", "OPENAI"),
    "anthropic": (FakeAnthropic, "claude-sonnet-4-5", "ANTHROPIC"),
    "gemini": (FakeGemini, "gemini-2.5-pro", "GEMINI"),
    "openai_compatible": (FakeChatCompletions, "qwen3", "OPENAI_COMPATIBLE"),
}


@pytest.mark.parametrize("provider", list(FAKES))
def test_after_stop_the_provider_accepts_the_next_request(owner, inline, settings, monkeypatch, provider):
    fake_class, model, env = FAKES[provider]
    settings.AGENT_STOP_POLL_SECONDS = 0.02
    with fake_class() as fake:
        monkeypatch.setenv(f"{env}_API_KEY", "sk-test-0123456789abcdef")
        monkeypatch.setenv(f"{env}_BASE_URL", fake.base_url)
        workflow, generation, ids = started_workflow(
            owner,
            [
                {"id": "trigger", "type": "chatTrigger", "params": {}},
                agent_node("lead", "Lead", provider=provider, model=model),
                {"id": "ctx", "type": "context", "params": {}},
                {"id": "mem", "type": "simpleMemory", "params": {}},
            ],
            [
                edge("trigger", "output-main", "lead", "input-main"),
                edge("ctx", "output-context", "lead", "input-context"),
                edge("mem", "output-tool", "lead", "input-tools"),
            ],
        )
        agent = ids["lead"]
        # A long, slow reply that would end in a tool call: Stop lands in the text, before the call.
        words = [f"part{i} " for i in range(60)]
        fake.push(Turn([Text("".join(words)), Call("memory", '{"operation": "remember", "content": "x"}')],
                       chunk_delay_s=0.03))  # fmt: skip
        box = {}

        def sender():
            try:
                box["run"] = chat_message_send(workflow=workflow, text="remember x")[1]
            finally:
                connection.close()

        thread = threading.Thread(target=sender)
        thread.start()
        run_id = wait_until(lambda: ChatRun.objects.values_list("pk", flat=True).first(), what="the run")
        wait_until(lambda: len(run_stream_state(run_id)[1]) > 0, what="streamed text")
        chat_run_stop(workflow=workflow, run_id=run_id)
        thread.join(timeout=60)
        run = ChatRun.objects.get(pk=run_id)
        assert_stopped_turn(workflow, generation, agent, run, "".join(words))

        fake.push(Turn([Text("Continuing.")]))
        _, second, _ = chat_message_send(workflow=workflow, text="go on")
        second.refresh_from_db()
        assert second.state == "finished", (second.error_code, second.error_message)
        assert second.reply_message.text == "Continuing."
        assert not fake.rejections
