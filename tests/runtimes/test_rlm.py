"""RLM as an agent provider: the real `rlms` package in its sandboxed child, its backend the strict fake Chat
Completions server (the worker relays every backend call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
import pytest

from agents.models import Firing
from agents.services.firings import firing_request_stop, firing_start
from conversations.models import RuntimeSessionBinding, UsageRecord
from conversations.store import conversation_key, load_conversation
from providers.runtimes.rlm.launch import SCRIPT, network_namespace_prefix
from providers.runtimes.rlm.sandbox import confinement as rlm_sandbox
from providers.wire import validate_messages
from tests.agents.factories import assistant_with
from tests.fakes import FakeChatCompletions
from tests.fakes.base import Text, Turn
from tests.race import signal_after
from tests.runtimes.helpers import fire_in_background
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MODEL = "local-model"


@pytest.fixture
def backend(monkeypatch):
    with FakeChatCompletions() as fake:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-rlm-backend-key")
        yield fake


def _rlm_agent(owner, **kwargs):
    return assistant_with(owner, provider="rlm", model=MODEL, rlm_backend="openai_compatible", **kwargs)


def _cell(code: str, text: str = "") -> Turn:
    return Turn([Text(f"{text}\n```repl\n{code}\n```")])


def _answer(content: str) -> Turn:
    return _cell(f"answer['content'] = {content!r}\nanswer['ready'] = True")


def _fire(workflow, generation, agent, prompt) -> Firing:
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt)
    )
    assert firing.state in (Firing.State.FINISHED, Firing.State.STOPPED), (firing.error_code, firing.error_message)
    return firing


def _stored(workflow, generation, agent) -> list[dict]:
    stored = load_conversation(conversation_key(workflow.pk, generation, agent))
    validate_messages(stored)
    return stored


def _results(stored: list[dict]) -> list[dict]:
    return [m["blocks"][0] for m in stored if m["role"] == "tool"]


def _sandbox_children() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if str(SCRIPT) in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def test_iterations_land_as_messagewire_and_chat_steps_and_the_next_firing_gets_a_transcript(owner, backend):
    from chat.models import ChatRunStep
    from chat.services import chat_message_send

    workflow, generation, ids = _rlm_agent(owner, system_prompt="You are Lead.")
    backend.push(
        _cell("print(context[-40:])", text="Let me read the context."),
        _cell("print(llm_query('Say OK'))", text="Ask a sub-model."),
        Turn([Text("OK")]),  # the llm_query sub-call
        _answer("forty-two"),
    )
    _, run, _ = chat_message_send(workflow=workflow, text="what is the answer?")
    run.refresh_from_db()
    assert run.state == "finished", (run.error_code, run.error_message)
    assert run.reply_message.text == "forty-two"
    stored = _stored(workflow, generation, ids["lead"])
    assert [m["role"] for m in stored] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip
    first = stored[2]
    assert first["blocks"][0] == {
        "type": "text",
        "text": "Let me read the context.\n```repl\nprint(context[-40:])\n```",
    }
    call = first["blocks"][1]
    assert (
        call["type"] == "tool_call" and call["name"] == "repl" and call["arguments"] == {"code": "print(context[-40:])"}
    )
    results = _results(stored)
    assert results[0]["tool_call_id"] == call["id"] and "what is the answer?" in results[0]["content"]
    assert not results[0]["is_error"]
    sub_calls = results[1]["observed"]["sub_calls"]
    assert [c["response"] for c in sub_calls] == ["OK"] and "OK" in results[1]["content"]
    final = stored[-1]
    assert final["blocks"] == [{"type": "text", "text": "forty-two"}]
    runtime = final["meta"]["runtime"]
    assert runtime["runtime"] == "rlm" and runtime["resumed"] is False and runtime["iterations"] == 3
    assert runtime["backend_calls"] == 4
    sandbox = runtime["sandbox"]
    assert sandbox["audit_hook"] is True and sandbox["rlimits"]["core_bytes"] == 0
    assert "OPENAI_COMPATIBLE_API_KEY" not in sandbox["environment"]  # the child never holds the key
    assert not RuntimeSessionBinding.objects.exists()  # nothing to resume
    # Every backend call went through the worker with the owner's (here: the environment's) key and the agent's model.
    assert len(backend.requests) == 4
    assert all(r.body["model"] == MODEL for r in backend.requests)
    assert all(r.headers.get("authorization") == "Bearer sk-rlm-backend-key" for r in backend.requests)
    assert "You are Lead." in backend.requests[0].body["messages"][0]["content"]
    # One ledger row for the step: the four calls' tokens.
    (row,) = UsageRecord.objects.filter(provider="rlm")
    assert row.input_tokens == 4 * 21 and row.output_tokens == 4 * 13 and row.model == MODEL
    # Each cell was a chat step, with its code and its output.
    steps = list(ChatRunStep.objects.filter(run=run).order_by("id"))
    assert [s.name for s in steps] == ["repl", "repl", "repl"]
    assert all(s.state == "finished" for s in steps)
    assert steps[0].arguments == {"code": "print(context[-40:])"} and "what is the answer?" in steps[0].result

    backend.push(_cell("print(context)"), _answer("You asked for the answer."))
    _, second, _ = chat_message_send(workflow=workflow, text="what did I ask?")
    second.refresh_from_db()
    assert second.state == "finished", (second.error_code, second.error_message)
    # The new run's context is the stored conversation as a portable transcript (printed by its first cell, then
    # sent back to the model with the cell's output).
    sent = json.dumps(backend.requests[-1].body["messages"])
    assert "<transcript>" in sent and "[user] what is the answer?" in sent and "[assistant] forty-two" in sent
    assert "[assistant called repl]" in sent


def test_a_sub_rlm_runs_in_the_same_sandbox_and_the_backend_call_cap_holds(owner, backend):
    workflow, generation, ids = _rlm_agent(owner, rlm_max_depth=2, rlm_max_llm_calls=4)
    backend.push(
        _cell("print(rlm_query('What is 6 * 7?'))"),  # call 1: root, iteration 1
        _cell("answer['content'] = str(6 * 7)\nanswer['ready'] = True"),  # call 2: the child RLM, in its own REPL
        _cell("print([llm_query('again') for _ in range(2)])"),  # call 3: root, iteration 2
        Turn([Text("once")]),  # call 4: the first llm_query; the second is refused
    )
    firing = _fire(workflow, generation, ids["lead"], "six times seven")
    assert len(backend.requests) == 4  # nothing past the cap reached the backend
    stored = _stored(workflow, generation, ids["lead"])
    results = _results(stored)
    (sub,) = results[0]["observed"]["sub_calls"]
    assert sub["recursive"] is True and sub["response"] == "42" and "[rlm_query" in results[0]["content"]
    assert "'once'" in results[1]["content"] and "backend call limit was reached" in results[1]["content"]
    # The root's next call is refused too: the run ends saying why.
    assert "backend call limit was reached" in firing.final_text
    assert stored[-1]["meta"]["runtime"]["backend_calls"] == 4


def test_a_hostile_program_is_stopped_by_the_sandbox_and_the_worker_is_unaffected(owner, backend, tmp_path):
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("the-secret-outside-the-sandbox")
    cwd, stdout, environ = os.getcwd(), sys.stdout, dict(os.environ)
    workflow, generation, ids = _rlm_agent(owner)
    backend.push(
        _cell(f"print(open({str(secret)!r}).read())"),
        _cell("import os\nprint(os.listdir('/'))"),
        _cell("import subprocess\nprint(subprocess.run(['ls', '/'], capture_output=True).stdout)"),
        _cell("block = bytearray(8 * 1024 ** 3)\nprint(len(block))"),
        _cell("import os\nprint(sorted(os.environ))\nos.chdir('/')\nprint(os.getcwd())"),
        _cell("import socket\nsocket.create_connection(('10.1.2.3', 80), timeout=2)"),
        _cell("import os, signal\nos.kill(os.getppid() or 1, signal.SIGTERM)"),
        _answer("done"),
    )
    firing = _fire(workflow, generation, ids["lead"], "misbehave")
    assert firing.final_text == "done"
    results = _results(_stored(workflow, generation, ids["lead"]))
    read, listing, spawn, allocation, environment, network, kill = results[:7]
    assert read["is_error"] and f"no access to {str(secret)!r} outside the working directory" in read["content"]
    assert "the-secret-outside-the-sandbox" not in json.dumps(_stored(workflow, generation, ids["lead"]))
    assert all("the-secret-outside-the-sandbox" not in json.dumps(r.body) for r in backend.requests)
    assert listing["is_error"] and "os.listdir outside the working directory" in listing["content"]
    assert "'etc'" not in listing["content"] and "'usr'" not in listing["content"]
    assert spawn["is_error"] and "subprocess.Popen is not allowed" in spawn["content"]
    assert allocation["is_error"] and "MemoryError" in allocation["content"]
    assert "OPENAI_COMPATIBLE_API_KEY" not in environment["content"] and "DJANGO" not in environment["content"]
    assert environment["is_error"] and "os.chdir outside the working directory" in environment["content"]
    assert network["is_error"] and "no network but the loopback" in network["content"]
    assert kill["is_error"] and "os.kill is not allowed" in kill["content"]
    # The worker: same directory, same stdout, same environment; no child left.
    assert os.getcwd() == cwd and sys.stdout is stdout and dict(os.environ) == environ
    assert not _sandbox_children()


def test_a_program_that_loops_forever_is_killed_at_the_wall_clock_limit(owner, backend):
    cwd, environ = os.getcwd(), dict(os.environ)
    workflow, generation, ids = _rlm_agent(owner, rlm_timeout_seconds=5)
    backend.push(_cell("print('spinning')\nwhile True:\n    pass", text="Spin."))
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="loop")
    )
    assert firing.state in (Firing.State.FINISHED, Firing.State.STOPPED), (firing.error_code, firing.error_message)
    stored = _stored(workflow, generation, ids["lead"])
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert stored[2]["blocks"][0]["text"].startswith("Spin.")  # the model's text arrived before its cell ran
    assert stored[2]["blocks"][1]["arguments"]["code"].startswith("print('spinning')")
    cell = stored[3]["blocks"][0]
    assert cell["is_error"] and "stopped before this cell finished" in cell["content"]
    final = stored[-1]
    assert final["meta"]["runtime"]["end_reason"] == "max_wall_time"
    assert "wall-clock limit" in final["blocks"][0]["text"]
    assert not _sandbox_children()
    assert os.getcwd() == cwd and dict(os.environ) == environ


def test_the_cpu_limit_ends_a_busy_program_and_says_so(owner, backend, settings):
    settings.RLM_SANDBOX_CPU_SECONDS = 2
    workflow, generation, ids = _rlm_agent(owner, rlm_timeout_seconds=60)
    backend.push(_cell("while True:\n    pass", text="Spin."))
    firing = _fire(workflow, generation, ids["lead"], "burn")
    stored = _stored(workflow, generation, ids["lead"])
    assert stored[-1]["meta"]["runtime"]["end_reason"] == "cpu_limit"  # not the wall clock's "max_wall_time"
    assert "CPU time limit" in stored[-1]["blocks"][0]["text"] and firing.final_text == stored[-1]["blocks"][0]["text"]
    assert "stopped before this cell finished" in _results(stored)[0]["content"]
    assert not _sandbox_children()


def test_stop_kills_the_sandbox_and_keeps_what_arrived(owner, backend):
    workflow, generation, ids = _rlm_agent(owner)
    backend.push(
        _cell("print('first cell')", text="Warm up."),
        _cell("import time\ntime.sleep(120)", text="Now wait."),
    )
    # The child reports each cell as it starts running it: the second one's start means it is in its sleep now.
    second_cell = lambda _collector, event: event.get("code", "").startswith("import time")  # noqa: E731
    with signal_after("providers.runtimes.rlm.collector.Collector.code_start", when=second_cell) as sleeping:
        background = fire_in_background(workflow, generation, ids["lead"], "take long")
        assert sleeping.wait(60), "the second cell never started"
    children = wait_until(_sandbox_children, what="the sandboxed child")
    firing = Firing.objects.get(workflow=workflow)
    assert firing_request_stop(firing_id=firing.pk)
    background.result(timeout=30)
    firing.refresh_from_db()
    assert firing.state == Firing.State.STOPPED, (firing.state, firing.error_code, firing.error_message)
    psutil.wait_procs(children, timeout=5)
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    assert not _sandbox_children()
    stored = _stored(workflow, generation, ids["lead"])
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert _results(stored)[0]["content"] == "first cell\n"
    assert "stopped before this cell finished" in _results(stored)[1]["content"]
    assert stored[-1]["meta"]["runtime"]["end_reason"] == "stopped"
    assert UsageRecord.objects.filter(provider="rlm").get().input_tokens == 2 * 21


def test_a_memory_call_from_the_repl_lands_in_the_agents_memory_namespace(owner, backend):
    from memory.models import MemoryItem
    from workflows.models import TodoItem

    workflow, generation, ids = _rlm_agent(owner, memory=True, todos=True)
    backend.push(
        _cell(
            "print(memory(operation='remember', content='The cat is Miso.'))\n"
            "print(todos(operation='add', text='Feed Miso'))"
        ),
        _answer("Remembered."),
    )
    firing = _fire(workflow, generation, ids["lead"], "remember my cat is Miso")
    assert firing.final_text == "Remembered."
    assert "memory(" in backend.requests[0].body["messages"][0]["content"]  # offered in the RLM's system prompt
    items = list(MemoryItem.objects.all())
    assert [i.content for i in items] == ["The cat is Miso."]
    assert items[0].namespace.workflow_id == workflow.pk and items[0].namespace.node_id == ids["mem"]
    (todo,) = TodoItem.objects.all()
    assert todo.text == "Feed Miso" and todo.workflow_id == workflow.pk and todo.node_id == ids["todo"]
    (result, _) = _results(_stored(workflow, generation, ids["lead"]))
    call, todo_call = result["observed"]["tool_calls"]
    assert call["name"] == "memory" and call["arguments"] == {"operation": "remember", "content": "The cat is Miso."}
    assert not call["is_error"] and "[memory " in result["content"]
    assert todo_call["name"] == "todos" and not todo_call["is_error"]


def test_the_openai_backend_is_called_through_the_responses_api_and_priced_as_its_model(owner, openai_fake):
    workflow, generation, ids = assistant_with(owner, provider="rlm", model="gpt-4.1")  # rlm_backend: openai
    openai_fake.push(_cell("print(2 + 2)"), _answer("4"))
    firing = _fire(workflow, generation, ids["lead"], "two plus two?")
    assert firing.final_text == "4"
    assert len(openai_fake.requests) == 2
    assert all(r.body["model"] == "gpt-4.1" and r.body["store"] is False for r in openai_fake.requests)
    assert all(r.headers.get("authorization") == "Bearer sk-test-codex-runtime" for r in openai_fake.requests)
    assert _results(_stored(workflow, generation, ids["lead"]))[0]["content"] == "4\n"
    (row,) = UsageRecord.objects.filter(provider="rlm")
    assert row.input_tokens == 2 * 21 and row.output_tokens == 2 * 13
    assert row.cost is not None and row.cost > 0  # the backend model's price (gpt-4.1), not the "rlm" fallback's


def test_the_owners_stored_key_and_base_url_for_the_backend_are_used(owner, monkeypatch):
    from provider_keys.models import AllowedProviderHost
    from provider_keys.services import owner_provider_key_set

    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-environment-key")
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens: must not be used
    with FakeChatCompletions() as fake:
        AllowedProviderHost.objects.create(host=f"127.0.0.1:{fake.port}", note="test fake")
        owner_provider_key_set(
            owner=owner, provider="openai_compatible", api_key="sk-owner-key", base_url=fake.base_url
        )
        workflow, generation, ids = _rlm_agent(owner)
        fake.push(_answer("with the owner's key"))
        firing = _fire(workflow, generation, ids["lead"], "hello")
        assert firing.final_text == "with the owner's key"
        assert [r.headers.get("authorization") for r in fake.requests] == ["Bearer sk-owner-key"]


def test_a_compaction_summary_is_one_plain_call_to_the_backend_without_a_sandbox(owner, backend):
    from conversations.store import COMPACTION_SUMMARY_HEADER

    workflow, generation, ids = _rlm_agent(owner, compaction_threshold=0.1)
    # The backend says each request held 20,000 tokens: past 10% of the 128k window the catalogue gives "rlm".
    backend.push(Turn(_answer("Noted.").parts, input_tokens=20_000))
    _fire(workflow, generation, ids["lead"], "first note")  # nothing older than this turn: nothing to compact
    backend.push(Turn(_answer("Noted again.").parts, input_tokens=20_000))
    backend.push(Turn([Text("The owner sent two notes; I noted both.")]))  # the summary, after the firing
    second = _fire(workflow, generation, ids["lead"], "second note")
    assert second.final_text == "Noted again."
    assert len(backend.requests) == 3
    assert "Recursive Language Model" in json.dumps(backend.requests[1].body)
    summary_request = json.dumps(backend.requests[2].body)
    assert "Recursive Language Model" not in summary_request and "first note" in summary_request
    stored = _stored(workflow, generation, ids["lead"])
    assert stored[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
    assert "I noted both." in stored[1]["blocks"][0]["text"]
    (row,) = UsageRecord.objects.filter(workflow_id=workflow.pk, kind="compaction")
    assert row.provider == "rlm" and row.input_tokens == 21


def test_the_api_and_the_form_show_the_rlm_fidelity(owner, owner_client):
    from django.urls import reverse

    from workflows.nodes.builtin import AgentParams

    workflow, _, ids = _rlm_agent(owner)
    runtime = owner_client.get(reverse("conversations-api-detail", args=[workflow.pk, ids["lead"]])).json()["runtime"]
    assert runtime["provider"] == "rlm"
    assert runtime["fidelity"]["label"] == "observable-only, non-resumable"
    assert "portable transcript" in runtime["fidelity"]["detail"] and runtime["session"] is None
    schema = AgentParams.model_json_schema()
    assert "rlm" in schema["properties"]["provider"]["enum"]
    assert (
        "Codex CLI and RLM keep what they show, each answer starting afresh"
        in schema["properties"]["provider"]["description"]
    )
    assert {"rlm_backend", "rlm_max_iterations", "rlm_timeout_seconds", "rlm_max_depth"} <= set(schema["properties"])


# --- the OS layers on their own, without the audit hook -------------------------------------------------------


def _python_in_sandbox(code: str, *prefix: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, sys.executable, "-I", "-B", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )


def test_landlock_alone_refuses_files_outside_the_working_directory(tmp_path):
    probe = _python_in_sandbox("import ctypes; libc = ctypes.CDLL(None); print(libc.syscall(444, None, 0, 1))")
    if int(probe.stdout.strip() or 0) <= 0:
        pytest.skip("this kernel has no Landlock: the audit hook is the only file guard (providers/README.md)")
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    work = tmp_path / "work"
    work.mkdir()
    code = f"""
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("sandbox", {str(rlm_sandbox.__file__)!r})
sandbox = importlib.util.module_from_spec(spec); spec.loader.exec_module(sandbox)
roots = sorted({{sys.prefix, sys.base_prefix}})
print("abi", sandbox.landlock(roots, [{str(work)!r}]))
open({str(work / "inside.txt")!r}, "w").write("ok")
for path in ({str(outside)!r}, "/etc/hostname"):
    try:
        open(path).read()
        print("read", path)
    except PermissionError:
        print("refused", path)
try:
    os.listdir("/")
    print("listed /")
except PermissionError:
    print("refused /")
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.executable, [sys.executable, "-c", "pass"])
    except PermissionError:
        os._exit(13)
    os._exit(0)
print("exec status", os.waitpid(pid, 0)[1] >> 8)
"""
    result = _python_in_sandbox(code)
    assert result.returncode == 0, result.stderr
    assert f"refused {outside}" in result.stdout and "refused /etc/hostname" in result.stdout
    assert "refused /" in result.stdout and (work / "inside.txt").read_text() == "ok"
    assert "exec status 13" in result.stdout  # not even the Python binary can be started again


def test_the_network_namespace_has_no_route_out():
    prefix = network_namespace_prefix()
    if not prefix:
        pytest.skip("unprivileged user namespaces are off here: the audit hook is the only network guard")
    code = """
import socket
try:
    socket.create_connection(("10.1.2.3", 80), timeout=2)
    print("connected")
except OSError as exc:
    print("refused", exc.errno)
print(sorted(name for _, name in socket.if_nameindex()))
"""
    result = _python_in_sandbox(code, *prefix)
    assert result.returncode == 0, result.stderr
    assert "refused" in result.stdout and "['lo']" in result.stdout


def test_the_pid_namespace_takes_a_forked_orphan_down_with_the_child(tmp_path):
    prefix = network_namespace_prefix()
    if not prefix:
        pytest.skip("unprivileged user namespaces are off here: the process group kill is the only reaper")
    marker = tmp_path / "orphan.pid"
    code = f"""
import os, time
if os.fork() == 0:
    os.setsid()  # out of the process group the worker kills
    open({str(marker)!r}, "w").write(str(os.getpid()))
    time.sleep(300)
print(os.getpid(), flush=True)
time.sleep(300)
"""
    process = subprocess.Popen(
        [*prefix, sys.executable, "-I", "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert process.stdout.readline().strip() == "1"  # the child is its namespace's init
    wait_until(marker.exists, timeout=10, what="the orphan to write its pid")
    tree = psutil.Process(process.pid).children(recursive=True)
    assert len(tree) == 2  # the child and its setsid'd orphan
    os.killpg(process.pid, 9)
    process.wait(timeout=10)
    gone, alive = psutil.wait_procs(tree, timeout=5)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def test_the_backend_calls_are_priced_one_by_one_then_added(owner, openai_fake):
    # Two iterations of 150k input tokens each: priced one by one they stay under gpt-5.5's long-context tier
    # (272k); their sum would cross it and bill about twice as much. Prices computed here from genai-prices.
    from decimal import Decimal

    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    workflow, generation, ids = assistant_with(owner, provider="rlm", model="gpt-5.5")  # rlm_backend: openai
    big = {"input_tokens": 150_000, "cached_tokens": 0}
    first, second = _cell("print(2 + 2)"), _answer("4")
    first.input_tokens = second.input_tokens = big["input_tokens"]
    first.cached_tokens = second.cached_tokens = 0
    openai_fake.push(first, second)
    _fire(workflow, generation, ids["lead"], "two plus two?")
    (row,) = UsageRecord.objects.filter(provider="rlm")
    assert row.input_tokens == 300_000

    def price(input_tokens, output_tokens):
        usage = PriceUsage(input_tokens=input_tokens, output_tokens=output_tokens)
        return Decimal(calc_price(usage, model_ref="gpt-5.5", provider_id="openai").total_price)

    one_by_one = 2 * price(150_000, 13)
    assert price(300_000, 26) > one_by_one  # the trap: the sum crosses the tier
    assert row.cost == one_by_one.quantize(row.cost)
    assert row.meta["price_source"].endswith("per call")
