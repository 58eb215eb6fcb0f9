"""A Vertex managed agent as an agent provider: the real google-genai SDK (Vertex mode, Interactions API) against
the local fake of Google's interactions endpoint. No network: the SDK is pointed at the fake, the credentials are a
fake access token or a service account whose token endpoint is the fake's."""

from __future__ import annotations

import json

import pytest

from agents.models import Firing
from agents.services.firings import firing_start
from conversations.models import RuntimeInteractionPoint, UsageRecord
from conversations.store import clear_conversation, conversation_key, load_conversation
from tests.agents.factories import assistant_with
from tests.fakes import Exec
from tests.fakes.base import Call, ErrorReply, Text, Think, Turn

pytestmark = [pytest.mark.django_db(transaction=True)]

AGENT = "antigravity-preview-05-2026"


def _vertex_agent(owner, **kwargs):
    params = {"project": "P", "location": "L", "agent": AGENT, "environment": "remote", **kwargs.pop("params", {})}
    return assistant_with(owner, provider="vertex_agent", model="gemini-3-flash", **params, **kwargs)


def _fire(workflow, generation, agent, prompt) -> Firing:
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt)
    )
    assert firing.state in (Firing.State.FINISHED, Firing.State.STOPPED), (firing.error_code, firing.error_message)
    return firing


def _stored(workflow, generation, agent) -> list[dict]:
    return load_conversation(conversation_key(workflow.pk, generation, agent))


def _points(workflow) -> list[RuntimeInteractionPoint]:
    return list(RuntimeInteractionPoint.objects.filter(workflow=workflow).order_by("cursor_length"))


def test_two_firings_continue_the_stored_interaction_in_the_same_environment(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Think("The owner greets me."), Text("Hello, I am Lead.")]))
    first = _fire(workflow, generation, ids["lead"], "hi there")
    assert first.final_text == "Hello, I am Lead."
    create = vertex_fake.creates()[0]
    assert create.headers["authorization"] == "Bearer ya29.test-vertex-token"
    assert create.headers["accept"] == "text/event-stream"
    body = create.body
    assert body["agent"] == AGENT and body["stream"] is True and body["environment"] == "remote"
    assert body["input"] == "hi there" and "previous_interaction_id" not in body
    assert "You are Lead." in body["system_instruction"]
    stored = _stored(workflow, generation, ids["lead"])
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    thinking, text = stored[-1]["blocks"]
    assert thinking["type"] == "thinking" and thinking["text"] == "The owner greets me."
    assert thinking["provider"] == "vertex_agent" and thinking["signature"]
    assert text == {"type": "text", "text": "Hello, I am Lead."}
    first_interaction = next(iter(vertex_fake.interactions))
    environment = vertex_fake.interactions[first_interaction]["environment_id"]
    runtime = stored[-1]["meta"]["runtime"]
    assert runtime["interaction_id"] == first_interaction and runtime["environment_id"] == environment
    assert runtime["continued_from"] is None
    # The stream snapshots carry no environment id: it was read from the interaction resource.
    assert any(r.method == "GET" and r.path.endswith(first_interaction) for r in vertex_fake.requests)
    [point] = _points(workflow)
    assert (point.cursor_length, point.interaction_id, point.environment_id) == (3, first_interaction, environment)

    vertex_fake.push(Turn([Text("You said hi there.")]))
    second = _fire(workflow, generation, ids["lead"], "what did I say?")
    assert second.final_text == "You said hi there."
    body = vertex_fake.creates()[-1].body
    assert body["previous_interaction_id"] == first_interaction  # the binding kept on the conversation
    assert body["environment"] == environment
    assert body["input"] == "what did I say?"  # only the new message: Google holds the rest
    stored = _stored(workflow, generation, ids["lead"])
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "user", "assistant"]
    assert stored[-1]["meta"]["runtime"]["continued_from"] == first_interaction
    second_interaction = stored[-1]["meta"]["runtime"]["interaction_id"]
    assert vertex_fake.interactions[second_interaction]["previous_interaction_id"] == first_interaction
    assert [(p.cursor_length, p.interaction_id) for p in _points(workflow)] == [
        (3, first_interaction),
        (5, second_interaction),
    ]
    assert not vertex_fake.rejections


def test_usage_of_each_firing_lands_in_the_ledger(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("One.")], input_tokens=120, cached_tokens=20, output_tokens=30, reasoning_tokens=7))
    _fire(workflow, generation, ids["lead"], "one")
    [record] = UsageRecord.objects.filter(workflow_id=workflow.pk)
    assert record.provider == "vertex_agent" and record.agent_node_id == ids["lead"] and record.outcome == "ok"
    assert (record.input_tokens, record.cached_input_tokens) == (120, 20)
    assert (record.output_tokens, record.reasoning_tokens) == (37, 7)  # thought tokens are output
    stored = _stored(workflow, generation, ids["lead"])
    assert stored[-1]["usage"]["input_tokens"] == 120 and "estimated" not in stored[-1]["usage"]


def test_clear_context_drops_the_binding_and_the_next_firing_starts_a_new_interaction(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("Noted.")]))
    _fire(workflow, generation, ids["lead"], "note the code word heron")
    assert _points(workflow)
    clear_conversation(workflow, generation, ids["lead"])
    assert not _points(workflow)
    vertex_fake.push(Turn([Text("Fresh start.")]))
    _fire(workflow, generation, ids["lead"], "hello again")
    body = vertex_fake.creates()[-1].body
    assert "previous_interaction_id" not in body and body["environment"] == "remote"  # nothing cleared is reused
    assert body["input"] == "hello again"
    assert len(vertex_fake.environments) == 2


def test_a_pinned_environment_is_used_every_firing(owner, vertex_fake):
    vertex_fake.environments.add("env-pinned")
    workflow, generation, ids = _vertex_agent(owner, params={"environment": "env-pinned"})
    vertex_fake.push(Turn([Text("First.")]), Turn([Text("Second.")]))
    _fire(workflow, generation, ids["lead"], "one")
    _fire(workflow, generation, ids["lead"], "two")
    first, second = (r.body for r in vertex_fake.creates())
    assert first["environment"] == second["environment"] == "env-pinned"
    assert second["previous_interaction_id"] == _points(workflow)[0].interaction_id
    assert _points(workflow)[-1].environment_id == "env-pinned"


def test_memory_is_offered_as_a_function_and_answered_within_the_firing(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner, memory=True)
    vertex_fake.push(
        Turn([Call("memory", json.dumps({"operation": "remember", "content": "The cat is Miso."}), id="call-1")]),
        Turn([Text("Saved.")]),
    )
    firing = _fire(workflow, generation, ids["lead"], "remember that the cat is Miso")
    assert firing.final_text == "Saved."
    first, second = vertex_fake.creates()
    [tool] = first.body["tools"]
    assert tool["type"] == "function" and tool["name"] == "memory" and tool["parameters"]["type"] == "object"
    [result] = second.body["input"]
    assert result["type"] == "function_result" and result["call_id"] == "call-1" and result["name"] == "memory"
    assert "Miso" in result["result"] and not result.get("is_error")
    asked = next(iter(vertex_fake.interactions))  # the continuation names the interaction that asked
    assert second.body["previous_interaction_id"] == asked and "previous_interaction_id" not in first.body
    # ...and runs in the same sandbox (read from the interaction: the stream did not say)
    assert second.body["environment"] == vertex_fake.interactions[asked]["environment_id"]
    assert len(vertex_fake.environments) == 1
    stored = _stored(workflow, generation, ids["lead"])
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert stored[2]["blocks"][0]["name"] == "memory" and stored[2]["blocks"][0]["arguments"]["content"]
    assert stored[3]["blocks"][0]["tool_call_id"] == "call-1"
    runtime = stored[-1]["meta"]["runtime"]
    assert len(runtime["interaction_ids"]) == 2 and runtime["interaction_id"] == runtime["interaction_ids"][-1]
    from memory.models import MemoryItem

    assert MemoryItem.objects.filter(content__contains="Miso").exists()
    # The next firing continues the last interaction (the one that answered), not the one waiting on the call.
    vertex_fake.push(Turn([Text("Miso.")]))
    _fire(workflow, generation, ids["lead"], "what is the cat called?")
    assert vertex_fake.creates()[-1].body["previous_interaction_id"] == runtime["interaction_id"]
    assert not vertex_fake.rejections


def test_server_side_tool_steps_are_stored_as_a_call_and_its_result(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Exec("print(6 * 7)", "42\n"), Text("It is 42.")]))
    _fire(workflow, generation, ids["lead"], "compute 6 * 7")
    stored = _stored(workflow, generation, ids["lead"])
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    call = stored[2]["blocks"][0]
    assert call["type"] == "tool_call" and call["name"] == "code_execution"
    assert call["arguments"] == {"code": "print(6 * 7)", "language": "python"}
    assert call["vertex_step"] == "code_execution_call"
    result = stored[3]["blocks"][0]
    assert result["tool_call_id"] == call["id"] and result["content"] == "42\n" and result["is_error"] is False
    assert stored[-1]["blocks"] == [{"type": "text", "text": "It is 42."}]


def test_an_interaction_google_no_longer_has_starts_over_from_the_record_and_says_so(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("The code word is heron.")]))
    _fire(workflow, generation, ids["lead"], "remember the code word heron")
    gone = _points(workflow)[0].interaction_id
    vertex_fake.interactions.pop(gone)  # expired on Google's side
    vertex_fake.push(Turn([Text("It was heron.")]))
    _fire(workflow, generation, ids["lead"], "what was the code word?")
    refused, fresh = vertex_fake.creates()[-2:]
    assert refused.body["previous_interaction_id"] == gone
    assert "previous_interaction_id" not in fresh.body
    assert "<transcript>" in fresh.body["input"] and "[assistant] The code word is heron." in fresh.body["input"]
    assert "could not be continued" in fresh.body["input"]
    runtime = _stored(workflow, generation, ids["lead"])[-1]["meta"]["runtime"]
    assert gone in runtime["note"] and runtime["continued_from"] is None


def test_refused_credentials_fail_the_firing_with_an_auth_error(owner, vertex_fake, monkeypatch):
    monkeypatch.setenv("VERTEX_AGENT_CREDENTIALS", "ya29.not-a-token-google-issued")
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("never sent")]))
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )
    assert firing.state == Firing.State.FAILED and firing.error_code == "provider_auth", firing.error_code
    assert len(vertex_fake.creates()) == 1  # one attempt, no retry


def test_a_server_error_is_one_attempt(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(ErrorReply(503, "The service is currently unavailable."))
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )
    assert firing.state == Firing.State.FAILED
    assert len(vertex_fake.creates()) == 1


def test_a_chat_streams_step_deltas_and_a_stopped_answer_is_not_continued(owner, vertex_fake, settings):
    import threading

    from django.db import connection

    from chat.models import ChatRun
    from chat.run_stream import run_stream_state
    from chat.services import chat_message_send, chat_run_stop
    from tests.chat.helpers import wait_until

    settings.AGENT_STOP_POLL_SECONDS = 0.02
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("First answer.")]))
    chat_message_send(workflow=workflow, text="hello")
    bound = _points(workflow)[-1].interaction_id
    words = "".join(f"part{i} " for i in range(80))
    vertex_fake.push(Turn([Text(words)], pause_after_first_text_s=60))
    box = {}

    def sender():
        try:
            box["run"] = chat_message_send(workflow=workflow, text="a long answer please")[1]
        finally:
            connection.close()

    thread = threading.Thread(target=sender)
    thread.start()
    run_id = wait_until(
        lambda: ChatRun.objects.filter(state="running").values_list("pk", flat=True).first(), what="the run"
    )
    wait_until(lambda: len(run_stream_state(run_id)[1]) > 0, what="streamed text", timeout=60)
    streamed = run_stream_state(run_id)[1]
    assert streamed and words.startswith(streamed)  # step.delta text reached the chat as it came
    chat_run_stop(workflow=workflow, run_id=run_id)
    thread.join(timeout=60)
    run = ChatRun.objects.get(pk=run_id)
    assert run.state == "stopped" and run.reply_message.text and words.startswith(run.reply_message.text)
    assert vertex_fake.creates()[-1].body["previous_interaction_id"] == bound
    # The stopped interaction's server state ends somewhere else than the saved partial answer: no point for it.
    assert len(_points(workflow)) == 1

    vertex_fake.push(Turn([Text("Continuing.")]))
    _, second, _ = chat_message_send(workflow=workflow, text="go on")
    second.refresh_from_db()
    assert second.state == "finished", (second.error_code, second.error_message)
    body = vertex_fake.creates()[-1].body
    assert "previous_interaction_id" not in body  # a new interaction, handed the record
    assert f"[assistant] {run.reply_message.text}" in body["input"] and "[assistant] First answer." in body["input"]
    assert not vertex_fake.rejections


def test_a_rewind_continues_from_the_interaction_recorded_at_that_point(owner, vertex_fake):
    from chat.models import ChatMessage
    from chat.services import chat_message_edit, chat_message_send, chat_message_switch

    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("Hi, I am Lead.")]), Turn([Text("Blue it is.")]))
    chat_message_send(workflow=workflow, text="hello")
    chat_message_send(workflow=workflow, text="my colour is blue")
    first, second = (p.interaction_id for p in _points(workflow))
    environment = _points(workflow)[0].environment_id
    blue = ChatMessage.objects.get(text="my colour is blue")

    # Editing the second message takes the stored conversation back to after the first answer: the edited message
    # continues the interaction recorded there, not the one the owner moved away from.
    vertex_fake.push(Turn([Text("Green it is.")]))
    _, run = chat_message_edit(workflow=workflow, message_id=blue.pk, text="my colour is green")
    run.refresh_from_db()
    assert run.state == "finished", (run.error_code, run.error_message)
    body = vertex_fake.creates()[-1].body
    assert body["previous_interaction_id"] == first and body["environment"] == environment
    assert body["input"] == "my colour is green"
    stored = _stored(workflow, generation, ids["lead"])
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "user", "assistant"]
    green = stored[-1]["meta"]["runtime"]["interaction_id"]
    assert green not in (first, second)

    # Switching back restores the blue branch's conversation, and with it the interaction recorded for it.
    chat_message_switch(workflow=workflow, message_id=blue.pk)
    vertex_fake.push(Turn([Text("Still blue.")]))
    chat_message_send(workflow=workflow, text="what is my colour?")
    assert vertex_fake.creates()[-1].body["previous_interaction_id"] == second

    # Editing the very first message rewinds to before any interaction: a new one starts, with nothing to hand.
    hello = ChatMessage.objects.get(text="hello")
    vertex_fake.push(Turn([Text("Hello again.")]))
    chat_message_edit(workflow=workflow, message_id=hello.pk, text="good morning")
    body = vertex_fake.creates()[-1].body
    assert "previous_interaction_id" not in body and body["input"] == "good morning"
    assert body["environment"] == "remote"
    assert not vertex_fake.rejections


def _service_account(token_uri: str) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "P",
        "private_key_id": "0123456789abcdef",
        "private_key": pem,
        "client_email": "agent-runner@p.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    return json.dumps(info, indent=2)


def test_the_owners_stored_service_account_signs_in_at_its_token_endpoint(owner, vertex_fake, monkeypatch):
    from provider_keys.services import owner_provider_key_set, owner_provider_key_test

    monkeypatch.delenv("VERTEX_AGENT_CREDENTIALS")  # only the owner's key may be used
    monkeypatch.setenv("VERTEX_AGENT_TOKEN_URIS", vertex_fake.token_uri)
    row = owner_provider_key_set(owner=owner, provider="vertex_agent", api_key=_service_account(vertex_fake.token_uri))
    assert row.key_suffix == "cdef"
    tested = owner_provider_key_test(owner=owner, provider="vertex_agent")
    assert tested.last_test_ok is True, tested.last_test_message
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("Signed in.")]))
    _fire(workflow, generation, ids["lead"], "hello")
    claims = vertex_fake.token_requests[-1]
    assert (
        claims["iss"] == "agent-runner@p.iam.gserviceaccount.com"
        and claims["aud"] == "https://oauth2.googleapis.com/token"
    )
    token = vertex_fake.creates()[-1].headers["authorization"].removeprefix("Bearer ")
    assert token in vertex_fake.issued_tokens  # the API call carried the token the endpoint issued


def test_a_service_account_pointing_elsewhere_is_refused_before_any_request(owner, vertex_fake, monkeypatch):
    from core.errors import ServiceError
    from provider_keys.services import owner_provider_key_set

    monkeypatch.delenv("VERTEX_AGENT_CREDENTIALS")
    with pytest.raises(ServiceError):
        owner_provider_key_set(owner=owner, provider="vertex_agent", api_key='{"type": "authorized_user"}')
    owner_provider_key_set(owner=owner, provider="vertex_agent", api_key=_service_account("http://10.0.0.1/token"))
    workflow, generation, ids = _vertex_agent(owner)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    )
    assert firing.state == Firing.State.FAILED and firing.error_code == "provider_auth"
    assert "token_uri" in firing.error_message
    assert not vertex_fake.requests and not vertex_fake.token_requests


def test_the_api_and_the_context_panel_say_what_google_keeps_and_what_we_keep(owner, owner_client, vertex_fake):
    from django.urls import reverse

    from workflows.nodes.builtin import AgentParams

    workflow, generation, ids = _vertex_agent(owner)
    url = reverse("conversations-api-detail", args=[workflow.pk, ids["lead"]])
    before = owner_client.get(url).json()["runtime"]
    assert before["provider"] == "vertex_agent" and before["session"] is None
    assert before["fidelity"]["label"] == "exact observable events plus interaction/environment binding"
    assert "Google keeps the interaction state server-side" in before["fidelity"]["detail"]
    vertex_fake.push(Turn([Text("Hello.")]))
    _fire(workflow, generation, ids["lead"], "hi")
    point = _points(workflow)[-1]
    session = owner_client.get(url).json()["runtime"]["session"]
    assert session["interaction_id"] == point.interaction_id and session["environment_id"] == point.environment_id
    assert "Google" in session["kept_by_google"] and session["matches_messages"] == 3

    from django.test import Client

    browser = Client()
    browser.force_login(owner)
    response = browser.get(reverse("conversations:context-panel", args=[workflow.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Exact observable events plus interaction/environment binding" in page  # the label, capitalised
    assert point.interaction_id in page and point.environment_id in page and "Google keeps" in page
    clear_conversation(workflow, generation, ids["lead"])
    assert owner_client.get(url).json()["runtime"]["session"] is None

    schema = AgentParams.model_json_schema()
    assert "vertex_agent" in schema["properties"]["provider"]["enum"]
    # The form's help is in an owner's words (issue 33); the fidelity label is the Context panel's (above).
    assert (
        "Vertex agent keeps everything it shows, and Google keeps the session"
        in (schema["properties"]["provider"]["description"])
    )
    assert "kept by Google" in schema["properties"]["environment"]["description"]
    with pytest.raises(ValueError):
        AgentParams(name="A", provider="vertex_agent", model="m")  # project and agent are required


def test_a_compaction_summary_is_one_fresh_interaction_that_binds_nothing(vertex_fake):
    from providers import summarize
    from providers.wire import text_message

    vertex_fake.push(Turn([Text("The owner's cat is Miso.")]))
    messages = [text_message("user", "my cat is Miso"), text_message("assistant", "Noted.")]
    params = {"project": "P", "location": "L", "agent": AGENT}
    summary = summarize(provider="vertex_agent", model="gemini-3-flash", messages=messages, runtime_params=params)
    assert summary == "The owner's cat is Miso." and summary.usage.input_tokens == 21
    [create] = vertex_fake.creates()
    assert "previous_interaction_id" not in create.body and create.body["environment"] == "remote"
    assert "my cat is Miso" in create.body["input"]
    assert not RuntimeInteractionPoint.objects.exists()


def test_the_wall_clock_limit_ends_the_read_and_keeps_what_arrived(owner, vertex_fake, settings):
    settings.AGENT_MAX_WALL_SECONDS = 6
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("Slow start and then nothing")], pause_after_first_text_s=120))
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="take your time")
    )
    assert firing.state in (Firing.State.STOPPED, Firing.State.FINISHED), (firing.error_code, firing.error_message)
    stored = _stored(workflow, generation, ids["lead"])
    assert stored[-1]["meta"]["runtime"]["end_reason"] == "max_wall_time"
    assert stored[-1]["blocks"][0]["stopped"] is True and stored[-1]["blocks"][0]["text"]
    assert stored[-1]["usage"]["estimated"] is True  # Google never reported usage for the cut interaction
    assert not _points(workflow)


def test_the_key_api_takes_a_service_account_and_never_shows_it(owner, owner_client, vertex_fake):
    key = _service_account(vertex_fake.token_uri)
    response = owner_client.put("/api/provider-keys/vertex_agent/", {"api_key": key}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["key_suffix"] == "cdef" and "PRIVATE KEY" not in response.content.decode()
    listing = owner_client.get("/api/provider-keys/").content.decode()
    assert "PRIVATE KEY" not in listing and "agent-runner@" not in listing
    too_long = owner_client.put("/api/provider-keys/anthropic/", {"api_key": "x" * 1500}, format="json")
    assert too_long.status_code == 400  # other providers keep their short-key rule


def test_a_reset_starts_the_new_generation_with_a_new_interaction_in_a_new_sandbox(owner, vertex_fake):
    from workflows.services import workflow_reset

    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("Noted.")]))
    _fire(workflow, generation, ids["lead"], "note the code word heron")
    outcome = workflow_reset(workflow=workflow, actor=owner)
    new_generation = outcome.generation.number
    assert new_generation != generation
    vertex_fake.push(Turn([Text("Fresh.")]))
    _fire(outcome.workflow, new_generation, ids["lead"], "hello")
    body = vertex_fake.creates()[-1].body
    assert "previous_interaction_id" not in body and body["environment"] == "remote" and body["input"] == "hello"
    assert [p.generation for p in _points(workflow)] == [new_generation]  # the old one went with its conversation


def test_todos_are_offered_beside_memory_and_answered_through_their_contract(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner, memory=True, todos=True)
    vertex_fake.push(
        Turn([Call("todos", json.dumps({"operation": "add", "text": "Buy cat food"}), id="call-t")]),
        Turn([Text("Added.")]),
    )
    _fire(workflow, generation, ids["lead"], "add a todo: buy cat food")
    first, second = vertex_fake.creates()
    assert sorted(t["name"] for t in first.body["tools"]) == ["memory", "todos"]
    [result] = second.body["input"]
    assert result["call_id"] == "call-t" and result["name"] == "todos" and not result.get("is_error")
    assert "Buy cat food" in result["result"]


def test_a_binding_of_another_agent_is_never_continued(owner, vertex_fake):
    workflow, generation, ids = _vertex_agent(owner)
    vertex_fake.push(Turn([Text("Hello.")]))
    _fire(workflow, generation, ids["lead"], "hi")
    [point] = _points(workflow)
    assert point.agent_ref == f"P/L/{AGENT}"
    RuntimeInteractionPoint.objects.filter(pk=point.pk).update(agent_ref="P/L/another-agent")
    vertex_fake.push(Turn([Text("Fresh.")]))
    _fire(workflow, generation, ids["lead"], "again")
    body = vertex_fake.creates()[-1].body
    assert "previous_interaction_id" not in body and "<transcript>" in body["input"]


def test_a_memory_call_inside_the_interaction_is_a_step_of_the_chat_run(owner, vertex_fake):
    from chat.models import ChatRunStep
    from chat.services import chat_message_send

    workflow, generation, ids = _vertex_agent(owner, memory=True)
    vertex_fake.push(
        Turn([Call("memory", json.dumps({"operation": "remember", "content": "The cat is Miso."}), id="call-1")]),
        Turn([Text("Saved.")]),
    )
    _, run, _ = chat_message_send(workflow=workflow, text="remember that the cat is Miso")
    [step] = ChatRunStep.objects.filter(run=run)
    assert (step.tool_call_id, step.name, step.state, step.is_error) == ("call-1", "memory", "finished", False)
    assert step.arguments == {"operation": "remember", "content": "The cat is Miso."}
    assert "Miso" in step.result
