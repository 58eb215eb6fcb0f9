"""Codex CLI as an agent provider (provider "codex_cli"): one firing step = one ephemeral `codex exec` run.

Fidelity: observable-only, non-resumable. Codex sends `store: false` and keeps its encrypted reasoning only within
a run, and `--ephemeral` writes no rollout, so nothing of a run can be continued: each firing sends the stored
conversation as a portable transcript in its prompt, and the thread id it reports is kept as a label only
(`meta.runtime.thread_id`). Its JSONL events (reasoning summaries, agent messages, command executions, errors) come
back as MessageWire in `ChatResult.observed`, in order; an agent message streams to the chat when it completes
(`codex exec --json` reports items, not token deltas).

Safety defaults: a temporary CODEX_HOME per run (its config.toml names the model, the provider's base URL and the
agent's system prompt; deleted after the run), the read-only sandbox, the shell, exec, web search, multi-agent and
goal tools switched off (`[features]`), stdin closed, an environment holding only the API key, the process in its
own group, killed on Stop or at the wall-clock limit.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .. import config
from ..adapters.common import estimated_usage
from ..errors import NetworkError, ServerError
from ..types import ChatRequest, ChatResult, Usage
from ..wire import text_block, tool_call_block, tool_result_message
from . import (
    RuntimeRun,
    attached_files_note,
    attachment_paths,
    handoff_prompt,
    new_message_files,
    split_request,
    write_attachments,
)
from .process import die_with_parent
from .tool_bridge import SERVER_NAME as BRIDGE_SERVER
from .tool_bridge import START_SECONDS, ToolBridge

PROVIDER = "codex_cli"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
ARGV_PROMPT_MAX = 100_000  # one argv string may hold at most 128 KiB on Linux; longer prompts go through stdin
logger = logging.getLogger("providers.codex_cli")
_END = object()

# Tools Codex offers unless told not to; an agent gets them only through its `runtime_tools` allowlist.
FEATURES_OFF = ("shell_tool", "unified_exec", "multi_agent", "goals", "apply_patch_freeform")
BRIDGE_TOKEN_ENV = "OPENCOMPANY_PROJECT_TOOLS_TOKEN"


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _config_toml(
    request: ChatRequest, system: str, base_url: str, allowed: list[str], bridge_url: str | None = None, wall=600.0
) -> str:
    features = "\n".join(f"{name} = {'true' if name in allowed else 'false'}" for name in FEATURES_OFF)
    # The project tools (memory, todos, MCP servers' tools) come from the run's bridge, by URL; its token is in the
    # environment only.
    bridge = (
        [
            f"[mcp_servers.{BRIDGE_SERVER}]",
            f"url = {_toml_string(bridge_url)}",
            f'bearer_token_env_var = "{BRIDGE_TOKEN_ENV}"',
            f"startup_timeout_sec = {int(START_SECONDS) + 10}",
            f"tool_timeout_sec = {max(1, int(wall))}",
            # `codex exec` asks nobody: without this a tool call "requires approval" and is refused. The tools are the
            # ones the owner wired into this agent.
            'default_tools_approval_mode = "approve"',
            "",
        ]
        if bridge_url
        else []
    )
    lines = [
        f"model = {_toml_string(request.model)}",
        'model_provider = "opencompany"',
        f'web_search = "{"live" if "web_search" in allowed else "disabled"}"',
    ]
    if system:
        lines.append(f"developer_instructions = {_toml_string(system)}")
    return "\n".join(
        [
            *lines,
            "",
            "[model_providers.opencompany]",
            'name = "opencompany"',
            f"base_url = {_toml_string(base_url)}",
            'wire_api = "responses"',
            'env_key = "OPENCOMPANY_CODEX_API_KEY"',
            "",
            "[features]",
            features,
            "",
            *bridge,
        ]
    )


def _is_project_call(item: dict) -> bool:
    return item.get("type") == "mcp_tool_call" and item.get("server") == BRIDGE_SERVER


def _binary() -> str:
    from codex_cli_bin import bundled_codex_path

    return str(bundled_codex_path())


def chat(request: ChatRequest, stream) -> ChatResult:
    run: RuntimeRun | None = request.runtime
    system, history, user_text = split_request(request.messages)
    base = Path(run.home) if run is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="codex-home-", dir=base))  # per run, deleted after it
    cwd = home / "cwd"
    cwd.mkdir()
    # The conversation's files, in the working directory its read-only sandbox may read; the new message's are
    # named in the prompt, earlier ones in the transcript.
    written = write_attachments(request.messages, cwd)
    prompt = handoff_prompt(history, user_text, paths=attachment_paths(request.messages))
    prompt += attached_files_note(new_message_files(request.messages), written)
    allowed = list(run.allowed_builtin_tools) if run is not None else []
    base_url = config.base_url_for(PROVIDER, request.base_url) or DEFAULT_BASE_URL
    wall = run.wall_seconds if run is not None else 600.0
    with contextlib.ExitStack() as running:
        running.callback(shutil.rmtree, home, ignore_errors=True)
        bridge = running.enter_context(ToolBridge(run.tools)) if run is not None and run.tools else None
        (home / "config.toml").write_text(
            _config_toml(request, system, base_url, allowed, bridge.url if bridge else None, wall)
        )
        env = {
            "CODEX_HOME": str(home),
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "OPENCOMPANY_CODEX_API_KEY": config.api_key_for(PROVIDER, request.api_key) or "missing-api-key",
            **({BRIDGE_TOKEN_ENV: bridge.token} if bridge else {}),
        }
        return _run(request, prompt, home, cwd, env, wall, stream)


def _run(request: ChatRequest, prompt: str, home: Path, cwd: Path, env: dict, wall: float, stream) -> ChatResult:
    argv = [*die_with_parent(), _binary(), "exec", "--json", "--ephemeral", "--skip-git-repo-check"]
    argv += ["-s", "read-only", "-C", str(cwd)]
    via_stdin = len(prompt.encode()) > ARGV_PROMPT_MAX
    argv.append("-" if via_stdin else prompt)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if via_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(cwd),
            start_new_session=True,  # its own process group: Stop kills it and whatever it started
        )
    except OSError as exc:
        shutil.rmtree(home, ignore_errors=True)
        raise NetworkError(f"Codex could not start: {exc}", provider=PROVIDER) from exc
    try:
        return _collect(request, process, prompt if via_stdin else None, stream, wall)
    finally:
        _kill(process)
        shutil.rmtree(home, ignore_errors=True)


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        logger.error("codex did not exit after SIGKILL", extra={"pid": process.pid})


def _collect(
    request: ChatRequest, process: subprocess.Popen, stdin_prompt: str | None, stream, wall: float
) -> ChatResult:
    inbox: queue.Queue = queue.Queue()
    stderr_tail: list[str] = []

    def read() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            line = line.strip()
            if not line:
                continue
            try:
                inbox.put((json.loads(line), None))
            except ValueError:
                logger.debug("codex: %s", line[:500])
        inbox.put((_END, None))

    def read_stderr() -> None:
        for line in process.stderr:  # type: ignore[union-attr]
            stderr_tail.append(line.decode(errors="replace") if isinstance(line, bytes) else line)
            del stderr_tail[:-20]

    threading.Thread(target=read, name="codex-stdout", daemon=True).start()
    threading.Thread(target=read_stderr, name="codex-stderr", daemon=True).start()
    if stdin_prompt is not None:
        process.stdin.write(stdin_prompt.encode())  # type: ignore[union-attr]
        process.stdin.close()  # type: ignore[union-attr]
    deadline = time.monotonic() + wall
    timed_out = {"value": False}

    def events():
        while True:
            try:
                item, _ = inbox.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() >= deadline:
                    timed_out["value"] = True
                    return
                continue
            if item is _END:
                return
            yield item

    collector = _Collector(stream)
    for event in stream.pump(events(), close=lambda: _kill(process)):
        collector.add(event)
    stopped = stream.stop_requested or timed_out["value"]
    if stopped:
        _kill(process)
    else:
        process.wait(timeout=30)
    if not stopped and collector.turn_failed:
        raise ServerError(f"Codex: {collector.turn_failed}", provider=PROVIDER)
    if not stopped and collector.usage is None:
        tail = "".join(stderr_tail).strip()[-500:]
        last = f" (last notice: {collector.notices[-1]})" if collector.notices else ""
        message = f"Codex ended without finishing its turn (exit {process.returncode}){last}: {tail}"
        raise ServerError(message, provider=PROVIDER)
    return collector.finish(request, stopped=stopped, timed_out=timed_out["value"])


class _Collector:
    def __init__(self, stream) -> None:
        self.stream = stream
        self.observed: list[dict] = []
        self.thread_id: str | None = None
        self.usage: dict | None = None
        self.turn_failed: str | None = None
        self.notices: list[str] = []

    def _assistant(self) -> dict:
        last = self.observed[-1] if self.observed else None
        if last is None or last["role"] != "assistant" or any(b.get("type") == "tool_call" for b in last["blocks"]):
            last = {"role": "assistant", "blocks": []}
            self.observed.append(last)
        return last

    def add(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "thread.started":
            self.thread_id = event.get("thread_id")
        elif kind == "turn.completed":
            self.usage = event.get("usage") or {}
        elif kind == "turn.failed":
            self.turn_failed = str((event.get("error") or {}).get("message") or "the turn failed")
        elif kind == "error":
            # A notice, not a failure: Codex reports its stream retries ("Reconnecting... 1/5 (stream disconnected
            # ...)") this way and then goes on to the answer; a failed turn is `turn.failed` (or no
            # `turn.completed` at all, whose error names the last notice).
            self._notice(str(event.get("message") or "error"))
        elif kind == "item.started" and (event.get("item") or {}).get("type") == "command_execution":
            self._command_step("started", event["item"])
        elif kind == "item.started" and _is_project_call(event.get("item") or {}):
            self._project_step("started", event["item"])
        elif kind == "item.completed":
            self._item(event.get("item") or {})

    def _notice(self, message: str) -> None:
        self.notices.append(message)
        call = {"id": f"codex-notice-{len(self.notices)}", "name": "codex_notice", "arguments": {}}
        self.stream.emit({"type": "runtime_step", "phase": "started", "tool_call": call, "result": None})
        result = {"is_error": False, "content": message}
        self.stream.emit({"type": "runtime_step", "phase": "finished", "tool_call": call, "result": result})

    def _command_step(self, phase: str, item: dict, result: dict | None = None) -> None:
        # Shown as a step of the chat run while it runs, like a native tool call (chat/observer.py).
        call = {"id": str(item.get("id")), "name": "command_execution", "arguments": {"command": item.get("command")}}
        self.stream.emit({"type": "runtime_step", "phase": phase, "tool_call": call, "result": result})

    def _project_step(self, phase: str, item: dict, result: dict | None = None) -> None:
        # A project tool (memory, an MCP server's tool) called through the bridge: a step under the tool's own name,
        # like the same call from a native agent.
        call = {"id": str(item.get("id")), "name": str(item.get("tool") or ""), "arguments": item.get("arguments")}
        self.stream.emit({"type": "runtime_step", "phase": phase, "tool_call": call, "result": result})

    def _project_call(self, item: dict) -> None:
        call_id, name = str(item.get("id")), str(item.get("tool") or "")
        arguments = item.get("arguments") if isinstance(item.get("arguments"), dict) else {}
        self._assistant()["blocks"].append(
            tool_call_block(id=call_id, name=name, arguments_raw=json.dumps(arguments, ensure_ascii=False))
        )
        result = item.get("result") or {}
        error = item.get("error")
        texts = [
            c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"
        ]
        content = "\n".join(texts) if texts else (str((error or {}).get("message") or error) if error else "")
        is_error = bool(error) or item.get("status") == "failed" or bool(result.get("is_error"))
        self.observed.append(tool_result_message(tool_call_id=call_id, name=name, content=content, is_error=is_error))
        self._project_step("started", item)  # a no-op when item.started came first: one step per call
        self._project_step("finished", item, {"is_error": is_error, "content": content})

    def _item(self, item: dict) -> None:
        kind = item.get("type")
        if _is_project_call(item):
            self._project_call(item)
            return
        if kind == "agent_message":
            self._assistant()["blocks"].append(text_block(item.get("text") or ""))
            self.stream.emit({"type": "text_delta", "text": item.get("text") or ""})
        elif kind == "reasoning":
            # A summary of the model's reasoning, observable only: no signature, never replayed.
            self._assistant()["blocks"].append(
                {"type": "thinking", "text": item.get("text") or "", "signature": None, "provider": PROVIDER}
            )
        elif kind == "command_execution":
            call_id = str(item.get("id"))
            self._assistant()["blocks"].append(
                tool_call_block(
                    id=call_id, name="command_execution", arguments_raw=json.dumps({"command": item.get("command")})
                )
            )
            output = item.get("aggregated_output") or ""
            exit_code = item.get("exit_code")
            content = f"{output}\n[exit code {exit_code}]" if exit_code is not None else output
            is_error = item.get("status") == "failed" or (exit_code not in (None, 0))
            self.observed.append(
                tool_result_message(tool_call_id=call_id, name="command_execution", content=content, is_error=is_error)
            )
            self._command_step("started", item)  # a no-op when item.started came first: one step per call
            self._command_step("finished", item, {"is_error": is_error, "content": content})
        else:
            # error, file_change, mcp_tool_call, web_search, todo_list...: kept as observed, under its own type.
            self._assistant()["blocks"].append({"type": f"codex_{kind}", "item": item})

    def finish(self, request: ChatRequest, *, stopped: bool, timed_out: bool) -> ChatResult:
        observed = self.observed
        if (
            not observed
            or observed[-1]["role"] != "assistant"
            or any(b.get("type") == "tool_call" for b in observed[-1]["blocks"])
        ):
            observed.append({"role": "assistant", "blocks": [text_block("", stopped=True)] if stopped else []})
        elif stopped and not any(b.get("type") == "text" for b in observed[-1]["blocks"]):
            # Stopped before the answer's text came (Codex sends a message only once it is complete): what arrived
            # (its reasoning summary) is kept, and the answer is marked stopped like any other stopped answer.
            observed[-1]["blocks"].append(text_block("", stopped=True))
        raw = self.usage or {}
        if self.usage is not None:
            usage = Usage(
                input_tokens=int(raw.get("input_tokens") or 0),
                cached_tokens=int(raw.get("cached_input_tokens") or 0),
                cache_creation_tokens=int(raw.get("cache_write_input_tokens") or 0),
                output_tokens=int(raw.get("output_tokens") or 0),
                reasoning_tokens=int(raw.get("reasoning_output_tokens") or 0),
            )
        else:
            # Stopped or timed out before `turn.completed`: the model was called (and bills) but no usage came.
            # Estimated as the native adapters do (the prompt it was sent, what it wrote), marked estimated.
            blocks = [b for m in observed if m["role"] == "assistant" for b in m["blocks"]]
            usage = estimated_usage(request, blocks)
        final = observed[-1]
        final["meta"] = {
            **final.get("meta", {}),
            "runtime": {
                "runtime": PROVIDER,
                "thread_id": self.thread_id,  # a label: nothing can resume it
                "resumed": False,
                **({"end_reason": "max_wall_time"} if timed_out else {}),
                **({"notices": self.notices} if self.notices else {}),
            },
        }
        final["usage"] = usage.to_dict()
        return ChatResult(
            message=final,
            usage=usage,
            stop_reason="stopped" if stopped else "end_turn",
            provider_ids={"thread_id": self.thread_id},
            observed=observed,
        )
