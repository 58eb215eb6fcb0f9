"""RLM (Recursive Language Models, package `rlms`) as an agent provider (provider "rlm"): one firing step = one
sandboxed RLM run.

Fidelity: observable-only, non-resumable. The RLM keeps its REPL state (variables, sub-RLMs) in the child process,
which ends with the run; we keep its iteration trajectory only (model text, code, output, sub-calls) as MessageWire,
and the next firing sends the stored conversation as a portable transcript (its `context`).

The RLM's "local" REPL `exec`s the model's code in the process that runs it, so that process is never a worker:
`rlm_sandbox.py` runs in a child of its own (own process group, killed with its parent, in its own network namespace
where the OS allows, resource limits, Landlock, an audit hook, a throwaway working directory, an environment without
any key). The child makes no HTTP call: each backend call (every iteration, `llm_query`, sub-RLMs) is a JSON line to
this process, which calls the backend (OpenAI's Responses API or an OpenAI-compatible Chat Completions server)
through the usual adapter with the owner's key, counts the usage and answers on the child's stdin. The project's
tools (memory, todos) reach the agent as REPL functions that call back the same way, answered through the tools'
normal contract (never the database from the sandbox). Each root-REPL cell streams to the chat as a step while it
runs; Stop and the wall-clock limit SIGKILL the child's group and keep what arrived.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .. import config
from ..errors import NetworkError, ProviderError, ServerError
from ..types import ChatRequest, ChatResult, Usage
from ..wire import text_block, text_message, tool_call_block, tool_result_message
from . import RuntimeRun, handoff_prompt, split_request
from .process import die_with_parent

PROVIDER = "rlm"
BACKENDS = ("openai", "openai_compatible")
SCRIPT = Path(__file__).with_name("rlm_sandbox.py")
# Per-agent options (AgentParams rlm_*) and their defaults; settings RLM_SANDBOX_* give the sandbox's own limits.
DEFAULTS = {
    "backend": "openai",
    "max_iterations": 10,
    "timeout_seconds": 300,
    "max_depth": 1,
    "max_llm_calls": 50,
}
SANDBOX_DEFAULTS = {
    "RLM_SANDBOX_CPU_SECONDS": 0,  # 0: the run's wall clock plus 5 s
    "RLM_SANDBOX_MEMORY_MB": 1024,
    "RLM_SANDBOX_OPEN_FILES": 128,
    "RLM_SANDBOX_FILE_MB": 64,
}
OUTPUT_CHARS = 20_000  # what a cell's output keeps (the child already cut longer ones)
LINE_MAX = 16 * 1024 * 1024  # a channel line longer than this ends the run: the child is not behaving
CHANNEL_MAX = 256 * 1024 * 1024  # all lines of one run together (a program can write to the channel itself)
TEXT_CHARS = 200_000  # what the model's text or a cell's code keeps in the stored conversation
ROOT_PROMPT_CHARS = 4000  # a longer new message is left to `context` only
logger = logging.getLogger("providers.rlm")
_END = object()
STOPPED_CELL = "No result observed: the run was stopped before this cell finished."


def _setting(name: str) -> int:
    return int(config.setting(name, SANDBOX_DEFAULTS[name]))


@functools.cache
def network_namespace_prefix() -> tuple[str, ...]:
    """argv prefix that starts the child in new user, network and PID namespaces (no root needed): an empty network
    with only a loopback, and a PID namespace whose init is the child, so whatever it forks (even into a session of
    its own) dies with it. () where the OS refuses (no unprivileged user namespaces): then the audit hook is the
    network guard and the process group kill the only reaper."""
    argv = ("/usr/bin/unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--")
    if not os.path.exists(argv[0]):
        return ()
    try:
        ok = subprocess.run([*argv, "/bin/true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return argv if ok else ()


def _options(run: RuntimeRun | None) -> dict:
    options = dict(DEFAULTS)
    options.update({k: v for k, v in ((run.params if run is not None else None) or {}).items() if v is not None})
    if options["backend"] not in BACKENDS:
        options["backend"] = "openai"
    return options


def chat(request: ChatRequest, stream) -> ChatResult:
    run: RuntimeRun | None = request.runtime
    options = _options(run)
    system, history, user_text = split_request(request.messages)
    base = Path(run.home) if run is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="rlm-run-", dir=base))  # throwaway, deleted after the run
    (workdir / "tmp").mkdir()
    wall = float(options["timeout_seconds"])
    if run is not None:
        wall = min(wall, run.wall_seconds)
    wall = max(wall, 1.0)
    tools = {t.definition.name: t for t in (run.tools if run is not None else [])}
    job = {
        "workdir": str(workdir),
        "model": request.model,
        "system": system,
        # The RLM's `context`: the stored conversation as a portable transcript, then the new message.
        "context": handoff_prompt(history, user_text),
        # What the model reads before it looks at `context`: the new message, unless it is long (then it is only
        # in `context`, which is the point of an RLM).
        "root_prompt": user_text
        if len(user_text) <= ROOT_PROMPT_CHARS
        else (f"The owner's new message ({len(user_text)} characters) is at the end of `context`; read it there."),
        "max_iterations": int(options["max_iterations"]),
        "max_depth": int(options["max_depth"]),
        "timeout": wall,
        "tools": {name: _tool_doc(tool) for name, tool in tools.items()},
        "limits": {
            # CPU seconds a little above the wall clock: the wall clock is the limit that speaks first, the CPU
            # limit catches a child the parent could no longer kill.
            "cpu_seconds": min(int(wall) + 5, _setting("RLM_SANDBOX_CPU_SECONDS") or int(wall) + 5),
            "memory_bytes": _setting("RLM_SANDBOX_MEMORY_MB") * 1024 * 1024,
            "open_files": _setting("RLM_SANDBOX_OPEN_FILES"),
            "file_bytes": _setting("RLM_SANDBOX_FILE_MB") * 1024 * 1024,
            "core_bytes": 0,
        },
    }
    read_end, write_end = os.pipe()
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(workdir),
        "TMPDIR": str(workdir / "tmp"),
    }
    argv = [*die_with_parent(), *network_namespace_prefix(), sys.executable, "-I", "-B", str(SCRIPT)]
    argv.append(str(write_end))
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(workdir),
            pass_fds=(write_end,),
            start_new_session=True,  # its own process group: Stop kills it and anything it started
        )
    except OSError as exc:
        os.close(read_end)
        os.close(write_end)
        shutil.rmtree(workdir, ignore_errors=True)
        raise NetworkError(f"RLM sandbox could not start: {exc}", provider=PROVIDER) from exc
    os.close(write_end)
    session = _Session(request, stream, options, process, read_end, tools, wall)
    try:
        session.send(job)
        return session.collect()
    finally:
        session.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def _tool_doc(tool) -> str:
    schema = json.dumps(tool.definition.parameters, ensure_ascii=False)
    name = tool.definition.name
    return (
        f"{tool.definition.description} Call it as `{name}(**arguments)`, the arguments matching this JSON schema: "
        f"{schema}. It returns the tool's answer as a string."
    )


class _Session:
    """The parent's side of one run: the channel, the backend calls it relays, the steps it streams."""

    def __init__(self, request, stream, options, process, read_fd, tools, wall) -> None:
        self.request = request
        self.stream = stream
        self.options = options
        self.process = process
        self.tools = tools
        self.wall = wall
        self.inbox: queue.Queue = queue.Queue()
        self.write_lock = threading.Lock()
        self.usage_lock = threading.Lock()
        self.stop_event = threading.Event()
        self.usage = Usage()
        self.llm_calls = 0
        self.backend_error: ProviderError | None = None
        self.output_tail: list[str] = []
        self.collector = _Collector(stream)
        self.sandbox: dict = {}
        self.final: str | None = None
        self.failure: str | None = None
        self.limit: str | None = None  # a sandbox limit the child reported as it ended (cpu_limit)
        self.timed_out = False
        threading.Thread(target=self._read_channel, args=(read_fd,), name="rlm-channel", daemon=True).start()
        threading.Thread(target=self._read_output, name="rlm-output", daemon=True).start()

    # --- plumbing ----------------------------------------------------------------------------------------

    def send(self, payload: dict) -> None:
        line = (json.dumps(payload, ensure_ascii=False) + "\n").encode()
        with self.write_lock:
            try:
                self.process.stdin.write(line)
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass  # the child is gone; its end is reported from the channel

    def _read_channel(self, fd: int) -> None:
        total = 0
        with os.fdopen(fd, "rb") as channel:
            while True:
                line = channel.readline(LINE_MAX + 1)
                if not line:
                    break
                total += len(line)
                if len(line) > LINE_MAX or total > CHANNEL_MAX:
                    self.inbox.put({"type": "_bad", "error": "the sandbox reported more than its channel allows"})
                    break
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self.inbox.put(event)
        self.inbox.put(_END)

    def _read_output(self) -> None:
        for raw in self.process.stdout:
            self.output_tail.append(raw.decode(errors="replace"))
            del self.output_tail[:-30]

    def kill(self) -> None:
        self.stop_event.set()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            logger.error("rlm sandbox did not exit after SIGKILL", extra={"pid": self.process.pid})
        with contextlib.suppress(OSError):
            self.process.stdin.close()

    # --- the run -----------------------------------------------------------------------------------------

    def collect(self) -> ChatResult:
        deadline = time.monotonic() + self.wall
        # The channel is already read on a thread of its own, so this loop polls Stop itself (every 50 ms, as
        # Stream.pump would) and leaves whatever it did not take in the inbox for the fold below.
        channel_ended = False
        while self.final is None and self.failure is None:
            if self.stream.stopped():
                self.stream.stop_requested = True
                break
            try:
                event = self.inbox.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() >= deadline:
                    self.timed_out = True
                    break
                continue
            if event is _END:
                channel_ended = True
                break
            self._handle(event)
        stopped = self.stream.stop_requested
        if stopped or self.timed_out:
            self.kill()
        else:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        # What arrived before the end and was not handled yet (a stop in the middle), up to the channel's end (the
        # child is gone, so it comes at once; 2 s at most): fold it in, starting nothing.
        fold_until = time.monotonic() + (0.0 if channel_ended else 2.0)
        while True:
            try:
                event = self.inbox.get(timeout=max(fold_until - time.monotonic(), 0.0))
            except queue.Empty:
                break
            if event is _END:
                break
            if event.get("type") not in ("llm", "tool"):
                self._handle(event)
        end_reason = self._end_reason(stopped)
        if (
            self.backend_error is not None
            and not stopped
            and self.final is None
            and not self.collector.observed
            and not self.collector.cells
        ):
            raise self.backend_error  # nothing ran: the step fails with the backend's own error
        if not self.sandbox and not stopped and not self.timed_out:
            tail = "".join(self.output_tail).strip()[-1000:]
            raise ServerError(
                f"the RLM sandbox failed to start (exit {self.process.returncode}): {tail}", provider=PROVIDER
            )
        if self.final is None and end_reason is None and self.failure is None:
            tail = "".join(self.output_tail).strip()[-500:]
            raise ServerError(
                f"the RLM sandbox ended without an answer (exit {self.process.returncode}): {tail}", provider=PROVIDER
            )
        return self.collector.finish(
            final=self.final,
            failure=self.failure,
            end_reason=end_reason,
            usage=self._usage(),
            sandbox=self.sandbox,
            llm_calls=self.llm_calls,
            stopped=stopped or self.timed_out,
        )

    def _end_reason(self, stopped: bool) -> str | None:
        if stopped:
            return "stopped"
        if self.timed_out:
            return "max_wall_time"
        code = self.process.returncode
        if self.final is not None or self.failure is not None:
            return None
        if self.limit or code == -signal.SIGXCPU:
            return self.limit or "cpu_limit"
        if code is not None and code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        if code not in (None, 0):
            return f"exit {code}"
        return None

    def _usage(self) -> Usage:
        from ..billing import ledger_fields

        with self.usage_lock:
            usage = Usage(
                input_tokens=self.usage.input_tokens,
                cached_tokens=self.usage.cached_tokens,
                output_tokens=self.usage.output_tokens,
                reasoning_tokens=self.usage.reasoning_tokens,
                estimated=self.usage.estimated,
            )
        # Priced as the backend's model (the ledger row is the agent's "rlm" row, with this cost).
        fields = ledger_fields(provider=self.options["backend"], model=self.request.model, usage=usage.to_dict())
        if fields.get("cost") is not None:
            usage.cost_usd = float(fields["cost"])
        return usage

    def _handle(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "ready":
            self.sandbox = event.get("sandbox") or {}
        elif kind == "llm":
            self._relay(event)
        elif kind == "tool":
            self._tool(event)
        elif kind == "_tool_done":
            self.collector.tool_done(event)
        elif kind == "model":
            self.collector.model(str(event.get("response") or ""))
        elif kind == "code_start":
            self.collector.code_start(event)
        elif kind == "code_end":
            self.collector.code_end(event)
        elif kind == "iteration":
            self.collector.iteration(event)
        elif kind == "done":
            self.final = str(event.get("response") or "")
        elif kind == "failed":
            self.failure = str(event.get("error") or "the RLM run failed")
        elif kind == "limit":
            self.limit = str(event.get("reason") or "limit")
        elif kind == "_bad":
            self.failure = str(event.get("error"))

    def _relay(self, event: dict) -> None:
        request_id = event.get("id")
        with self.usage_lock:
            if self.llm_calls >= int(self.options["max_llm_calls"]):
                self.send({"id": request_id, "ok": False, "error": "the run's backend call limit was reached"})
                return
            self.llm_calls += 1
        messages = [
            text_message(m.get("role") if m.get("role") in ("system", "user", "assistant") else "user", str(c))
            for m in event.get("messages") or []
            if isinstance(m, dict) and (c := m.get("content")) is not None
        ]
        threading.Thread(target=self._call_backend, args=(request_id, messages), daemon=True).start()

    def _call_backend(self, request_id, messages: list[dict]) -> None:
        from ..adapters.common import Stream
        from ..unifier import adapter_for

        backend = self.options["backend"]
        call = ChatRequest(
            provider=backend,
            model=self.request.model,
            messages=messages,
            api_key=self.request.api_key or config.api_key_for(backend),
            base_url=self.request.base_url or config.base_url_for(backend),
            url_policy=self.request.url_policy,
        )
        try:
            result = adapter_for(backend).chat(call, Stream(None, self.stop_event.is_set))
        except ProviderError as exc:
            self.backend_error = self.backend_error or exc
            self.send({"id": request_id, "ok": False, "error": f"{exc.code}: {exc.message}"})
            return
        except Exception as exc:  # any other failure is the call's answer, never the worker's crash
            logger.exception("rlm backend call failed")
            self.send({"id": request_id, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
            return
        with self.usage_lock:
            self.usage.input_tokens += result.usage.input_tokens
            self.usage.cached_tokens += result.usage.cached_tokens
            self.usage.output_tokens += result.usage.output_tokens
            self.usage.reasoning_tokens += result.usage.reasoning_tokens
            self.usage.estimated = self.usage.estimated or result.usage.estimated
        text = "".join(b.get("text", "") for b in result.message.get("blocks", []) if b.get("type") == "text")
        usage = {"input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens}
        self.send({"id": request_id, "ok": True, "content": text, "usage": usage})

    def _tool(self, event: dict) -> None:
        request_id = event.get("id")
        name = str(event.get("name") or "")
        arguments = event.get("arguments") if isinstance(event.get("arguments"), dict) else {}
        tool = self.tools.get(name)
        call_id = self.collector.tool_start(name, arguments)
        if tool is None:
            content = f"unknown tool {name!r}"
            self.send({"id": request_id, "content": content, "is_error": True})
            self.collector.tool_done({"call_id": call_id, "content": content, "is_error": True})
            return

        def run() -> None:
            try:
                content, is_error = tool.call(arguments, call_id)
            except Exception as exc:  # the tool's failure is its answer
                logger.exception("rlm project tool failed")
                content, is_error = f"{type(exc).__name__}: {exc}", True
            self.send({"id": request_id, "content": content, "is_error": is_error})
            self.inbox.put({"type": "_tool_done", "call_id": call_id, "content": content, "is_error": is_error})

        threading.Thread(target=run, name="rlm-tool", daemon=True).start()


def _step(stream, phase: str, call: dict, result: dict | None = None) -> None:
    # The chat shows each cell and each project tool call as a step while the run goes on (chat/observer.py).
    stream.emit({"type": "runtime_step", "phase": phase, "tool_call": call, "result": result})


class _Collector:
    """Turns the child's reports into MessageWire and chat steps.

    One iteration = one assistant message (the model's text, then each REPL cell as a `repl` tool call), followed by
    one tool message per cell (its stdout and stderr, the project tool calls it made and its sub-calls).
    """

    def __init__(self, stream) -> None:
        self.stream = stream
        self.observed: list[dict] = []
        self.iterations = 0
        self.response: str | None = None  # the current iteration's model text, before its iteration report
        self.cells: list[dict] = []  # cells of the current iteration, as they start and end
        self.tool_calls: dict[str, dict] = {}
        self.tool_count = 0
        self.cell_count = 0  # ids are ours: the child's numbers only pair a cell's start with its end

    def model(self, response: str) -> None:
        self.response = response[:TEXT_CHARS]

    def code_start(self, event: dict) -> None:
        self.cell_count += 1
        code = str(event.get("code") or "")[:TEXT_CHARS]
        cell = {"id": f"rlm-cell-{self.cell_count}", "n": event.get("n"), "code": code, "tools": [], "ended": False}
        self.cells.append(cell)
        _step(
            self.stream,
            "started",
            {"id": cell["id"], "name": "repl", "arguments": {"code": cell["code"]}},
        )

    def code_end(self, event: dict) -> None:
        for cell in self.cells:
            if cell["n"] == event.get("n") and not cell["ended"]:
                cell.update(ended=True, stdout=str(event.get("stdout") or ""), stderr=str(event.get("stderr") or ""))
                content = _cell_output(cell)
                result = {"content": content, "is_error": bool(cell["stderr"].strip())}
                call = {"id": cell["id"], "name": "repl", "arguments": {"code": cell["code"]}}
                _step(self.stream, "finished", call, result)
                return

    def tool_start(self, name: str, arguments: dict) -> str:
        self.tool_count += 1
        call_id = f"rlm-tool-{self.tool_count}"
        entry = {"id": call_id, "name": name, "arguments": arguments, "content": None, "is_error": False}
        self.tool_calls[call_id] = entry
        open_cells = [c for c in self.cells if not c["ended"]]
        if open_cells:
            open_cells[-1]["tools"].append(entry)
        _step(self.stream, "started", {"id": call_id, "name": name, "arguments": arguments})
        return call_id

    def tool_done(self, event: dict) -> None:
        entry = self.tool_calls.get(str(event.get("call_id")))
        if entry is None or entry["content"] is not None:
            return
        entry.update(content=str(event.get("content") or ""), is_error=bool(event.get("is_error")))
        result = {"content": entry["content"], "is_error": entry["is_error"]}
        _step(
            self.stream, "finished", {"id": entry["id"], "name": entry["name"], "arguments": entry["arguments"]}, result
        )

    def iteration(self, event: dict) -> None:
        self.iterations += 1
        blocks = list(event.get("code_blocks") or [])
        # The iteration's cells are the last len(blocks) cells started; their tool calls came in while they ran.
        cells = self.cells[-len(blocks) :] if blocks else []
        for cell, block in zip(cells, blocks, strict=False):
            cell.update(
                ended=True,
                stdout=str(block.get("stdout") or ""),
                stderr=str(block.get("stderr") or ""),
                sub_calls=block.get("sub_calls") or [],
            )
        response = str(event.get("response") or "")[:TEXT_CHARS]
        self._append(response, cells, iteration=self.iterations)
        self.cells = []
        self.response = None

    def _append(self, response: str, cells: list[dict], *, iteration: int, stopped: bool = False) -> None:
        blocks = [text_block(response, stopped=stopped)] if response or stopped else []
        for cell in cells:
            arguments = json.dumps({"code": cell["code"]}, ensure_ascii=False)
            blocks.append(tool_call_block(id=cell["id"], name="repl", arguments_raw=arguments))
        self.observed.append({"role": "assistant", "blocks": blocks, "meta": {"rlm": {"iteration": iteration}}})
        for cell in cells:
            if cell.get("ended"):
                content, is_error = _cell_output(cell), bool(str(cell.get("stderr") or "").strip())
            else:
                content, is_error = STOPPED_CELL, True
            message = tool_result_message(tool_call_id=cell["id"], name="repl", content=content, is_error=is_error)
            observed = {
                "tool_calls": [
                    {k: t[k] for k in ("name", "arguments", "content", "is_error")} for t in cell.get("tools", [])
                ],
                "sub_calls": cell.get("sub_calls") or [],
            }
            message["blocks"][0]["observed"] = observed
            self.observed.append(message)

    def finish(
        self,
        *,
        final: str | None,
        failure: str | None,
        end_reason: str | None,
        usage: Usage,
        sandbox: dict,
        llm_calls: int,
        stopped: bool,
    ) -> ChatResult:
        if self.response is not None or self.cells:
            # The iteration in progress when the run ended: its model text and cells, as far as they went.
            self._append(self.response or "", self.cells, iteration=self.iterations + 1, stopped=True)
        if final is not None:
            answer = [text_block(final)]
        else:
            answer = [text_block(_ending_text(failure, end_reason), stopped=stopped)]
            if not stopped:
                self.stream.emit({"type": "text_delta", "text": answer[0]["text"]})
        if final is not None:
            self.stream.emit({"type": "text_delta", "text": final})
        runtime = {
            "runtime": PROVIDER,
            "resumed": False,
            "iterations": self.iterations,
            "backend_calls": llm_calls,
            "sandbox": sandbox,
        }
        if end_reason:
            runtime["end_reason"] = end_reason
        if failure:
            runtime["error"] = failure
        final_message = {"role": "assistant", "blocks": answer, "meta": {"runtime": runtime}, "usage": usage.to_dict()}
        self.observed.append(final_message)
        stop_reason = "stopped" if stopped else ("end_turn" if final is not None else "other")
        return ChatResult(
            message=final_message,
            usage=usage,
            stop_reason=stop_reason,
            provider_ids={"iterations": self.iterations, "backend_calls": llm_calls},
            observed=self.observed,
        )


def _ending_text(failure: str | None, end_reason: str | None) -> str:
    if end_reason == "stopped":
        return ""
    reasons = {
        "max_wall_time": "its wall-clock limit was reached",
        "cpu_limit": "its CPU time limit was reached",
    }
    if failure:
        return f"The RLM run ended without an answer: {failure}"
    why = reasons.get(end_reason or "", f"the sandbox ended it ({end_reason})")
    return f"The RLM run was stopped by its sandbox before it answered: {why}."


def _cell_output(cell: dict) -> str:
    parts = []
    stdout = str(cell.get("stdout") or "")
    stderr = str(cell.get("stderr") or "")
    if stdout:
        parts.append(stdout[:OUTPUT_CHARS])
    if stderr.strip():
        parts.append(f"[stderr]\n{stderr.strip(chr(10))[:OUTPUT_CHARS]}")  # rlm starts an exception's line with one
    for tool in cell.get("tools", []):
        marker = " (error)" if tool.get("is_error") else ""
        arguments = json.dumps(tool["arguments"], ensure_ascii=False)
        parts.append(f"[{tool['name']} {arguments}{marker}] {tool.get('content') or ''}")
    for call in cell.get("sub_calls") or []:
        kind = "rlm_query" if call.get("recursive") else "llm_query"
        parts.append(f"[{kind} {call.get('model')}] {str(call.get('response') or '')[:2000]}")
    return "\n".join(parts) if parts else "(no output)"
