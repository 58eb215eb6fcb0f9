"""Claude Code as an agent provider (provider "claude_code"): one firing step = one Claude Code query.

Fidelity: exact observable stream plus explicit session binding. The session id is ours, chosen before the first
event (`session_id=`), and the next firing resumes it (`resume=`) while its transcript file exists under this
conversation's CLAUDE_CONFIG_DIR; when it is gone, a new session starts from a portable transcript of the stored
conversation and the answer carries a note saying so (`meta.runtime.note`). Every message the run streamed
(assistant blocks with thinking signatures, tool calls, tool results) comes back as MessageWire in
`ChatResult.observed`; the firing stores them all and runs none of their tool calls (Claude Code ran them).

Safety defaults: no built-in tool (`tools=[]`, or the owner's allowlist, each named tool auto-approved and nothing
else), no settings files (`setting_sources=[]`), an emptied working directory per run, an environment holding only
the API key, base URL and config dir, a wall-clock limit, and Stop / the limit SIGKILL the CLI's process group.
The project's own tools (memory, todos) are offered as an in-process MCP server named `project`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

from .. import config
from ..errors import AuthError, NetworkError, ProviderError, RateLimitedError, ServerError
from ..types import ChatRequest, ChatResult, Usage
from ..wire import text_block, tool_call_block, tool_result_message
from . import RuntimeRun, handoff_prompt, split_request
from .process import clean_env_launcher, group_alive, kill_group

PROVIDER = "claude_code"
MCP_SERVER = "project"
logger = logging.getLogger("providers.claude_code")
_END = object()


class _ExpectedExit(logging.Filter):
    """When Stop or the wall-clock limit kills the CLI, the SDK's message reader sees the process die and logs
    "Fatal error in message reader" at ERROR. That exit is what we asked for: on the run threads whose CLI we
    killed on purpose, the SDK's (and its event loop's) ERROR records become DEBUG ones. Any other thread's error
    stays an error."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.thread in self.threads:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            record.msg = f"(expected: the run was stopped) {record.msg}"
        return True

    def expect(self, thread_id: int | None) -> None:
        if thread_id is not None:
            with self.lock:
                self.threads.add(thread_id)

    def forget(self, thread_id: int | None) -> None:
        with self.lock:
            self.threads.discard(thread_id)


_expected_exit = _ExpectedExit()
for _name in ("claude_agent_sdk._internal.query", "claude_agent_sdk._internal.transport.subprocess_cli", "asyncio"):
    logging.getLogger(_name).addFilter(_expected_exit)


def _bundled_cli() -> str:
    import claude_agent_sdk

    return str(Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")


def _cwd_slug(path: Path) -> str:
    # Claude Code keeps a session under projects/<its cwd with every non-alphanumeric character as "-">.
    return "".join(c if c.isalnum() else "-" for c in str(path))


def transcript_path(home: Path, session_id: str) -> Path:
    return home / "config" / "projects" / _cwd_slug(home / "cwd") / f"{session_id}.jsonl"


def _mcp_server(run: RuntimeRun):
    from claude_agent_sdk import create_sdk_mcp_server, tool

    tools = []
    for item in run.tools:

        def make(item=item):
            counter = {"n": 0}

            async def handler(arguments: dict) -> dict:
                counter["n"] += 1
                # Project tools touch the database: run them on a thread of their own, off this event loop.
                call_id = f"{item.definition.name}-{counter['n']}"
                content, is_error = await asyncio.to_thread(item.call, arguments, call_id)
                return {"content": [{"type": "text", "text": content}], "is_error": is_error}

            return tool(item.definition.name, item.definition.description, item.definition.parameters)(handler)

        tools.append(make())
    return create_sdk_mcp_server(MCP_SERVER, tools=tools) if tools else None


def chat(request: ChatRequest, stream) -> ChatResult:
    if request.runtime is None:
        # A call outside a firing (a compaction's summary): a throwaway home, nothing resumed, nothing kept.
        home = Path(tempfile.mkdtemp(prefix="oc-claude-code-"))
        try:
            return _chat(request, stream, RuntimeRun(home=home))
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return _chat(request, stream, request.runtime)


def _chat(request: ChatRequest, stream, run: RuntimeRun) -> ChatResult:
    home = Path(run.home)
    system, history, user_text = split_request(request.messages)
    resume = run.resume
    note = None
    resumed = False
    if resume and Path(resume["transcript_path"]).is_file():
        session_id, resumed = resume["session_id"], True
        prompt = user_text
    else:
        session_id = str(uuid.uuid4())
        if resume:
            note = (
                f"The Claude Code session {resume['session_id']} could not be resumed: its transcript "
                f"({resume['transcript_path']}) is gone from this worker. A new session {session_id} started from a "
                "portable transcript of the stored conversation."
            )
            logger.warning("claude code transcript gone", extra={"session_id": resume["session_id"]})
        elif history:
            note = f"A new Claude Code session {session_id} started from a portable transcript of the stored record."
        prompt = handoff_prompt(history, user_text, note=note if resume else None)

    cwd = home / "cwd"
    shutil.rmtree(cwd, ignore_errors=True)  # throwaway: nothing of an earlier run is left for this one to read
    cwd.mkdir(parents=True)
    control = home / "proc"
    control.mkdir(parents=True, exist_ok=True)
    (control / "pid").unlink(missing_ok=True)
    config_dir = home / "config"
    config_dir.mkdir(parents=True, exist_ok=True)
    api_key = config.api_key_for(PROVIDER, request.api_key) or "missing-api-key"
    base_url = config.base_url_for(PROVIDER, request.base_url)
    env = {"ANTHROPIC_API_KEY": api_key, "CLAUDE_CONFIG_DIR": str(config_dir)}
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    launcher = clean_env_launcher(
        control,
        _bundled_cli(),
        names=[
            *env,
            "CLAUDE_CODE_ENTRYPOINT",
            "CLAUDE_AGENT_SDK_VERSION",
            "CLAUDE_AGENT_SDK_CLIENT_APP",
            "CLAUDE_AGENT_SDK_DERIVED_CLIENT_APP",
            "CLAUDE_CODE_SDK_READS_SESSION_STATE",
            "PWD",
        ],
        fixed={
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
    )
    server = _mcp_server(run)
    project_tools = [f"mcp__{MCP_SERVER}__{t.definition.name}" for t in run.tools]
    inbox: queue.Queue = queue.Queue()
    options_kwargs = {
        "model": request.model,
        "system_prompt": system or None,
        "tools": list(run.allowed_builtin_tools),
        "allowed_tools": [*run.allowed_builtin_tools, *project_tools],
        "setting_sources": [],
        "cwd": str(cwd),
        "cli_path": str(launcher),
        "env": env,
        "include_partial_messages": True,
        "mcp_servers": {MCP_SERVER: server} if server else {},
        "strict_mcp_config": True,
        "stderr": lambda line: logger.debug("claude code: %s", line),
    }
    if resumed:
        options_kwargs["resume"] = session_id
    else:
        options_kwargs["session_id"] = session_id

    def produce() -> None:
        from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

        async def main() -> None:
            async with ClaudeSDKClient(ClaudeAgentOptions(**options_kwargs)) as client:
                await client.query(prompt)
                async for item in client.receive_response():
                    inbox.put((item, None))

        try:
            asyncio.run(main())
        except BaseException as exc:  # handed to the step's thread
            inbox.put((_END, exc))
            return
        inbox.put((_END, None))

    deadline = time.monotonic() + run.wall_seconds
    timed_out = {"value": False}

    def kill_on_purpose() -> None:
        _expected_exit.expect(worker.ident)  # the SDK's reader will see the process die: that is no error
        kill_group(control)

    def items():
        while True:
            try:
                item, error = inbox.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() >= deadline:
                    timed_out["value"] = True
                    kill_on_purpose()
                    return
                continue
            if item is _END:
                if error is not None:
                    raise error
                return
            yield item

    worker = threading.Thread(target=produce, name="claude-code-run", daemon=True)
    worker.start()
    collector = _Collector(stream)
    error: BaseException | None = None
    try:
        for item in stream.pump(items(), close=kill_on_purpose):
            collector.add(item)
    except BaseException as exc:
        error = exc
    stopped = stream.stop_requested or timed_out["value"]
    if stopped:
        kill_on_purpose()  # at once, not best-effort later: the run must not outlive its step
    worker.join(timeout=10)
    _wait_gone(control)
    _expected_exit.forget(worker.ident)
    if error is not None and not stopped:
        raise _map_error(error) from error
    if collector.result is not None and collector.result.get("is_error") and not stopped:
        raise _result_error(collector.result)
    if not stopped and collector.result is None:
        raise ServerError("Claude Code ended without a result", provider=PROVIDER)
    return collector.finish(
        request,
        session_id=session_id,
        resumed=resumed,
        note=note,
        previous_cost=float((resume or {}).get("session_cost_usd") or 0) if resumed else 0.0,
        transcript=str(transcript_path(home, session_id)),
        stopped=stopped,
        timed_out=timed_out["value"],
    )


def _wait_gone(control: Path) -> None:
    for _ in range(100):
        if not group_alive(control):
            return
        time.sleep(0.05)
    kill_group(control)


def _map_error(exc: BaseException) -> ProviderError:
    if isinstance(exc, ProviderError):
        return exc
    return NetworkError(f"Claude Code failed: {type(exc).__name__}: {exc}", provider=PROVIDER)


def _result_error(result: dict) -> ProviderError:
    status = result.get("api_error_status")
    text = "; ".join(result.get("errors") or []) or str(result.get("result") or result.get("subtype"))
    message = f"Claude Code: {text}"
    if status == 401:
        return AuthError(message, provider=PROVIDER, status=status)
    if status == 429:
        return RateLimitedError(message, provider=PROVIDER, status=status)
    return ServerError(message, provider=PROVIDER, status=status)


class _Collector:
    """Turns the SDK's messages into MessageWire as they arrive, and keeps what a stop leaves half-received."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.observed: list[dict] = []
        self.result: dict | None = None
        self.call_names: dict[str, str] = {}
        self.answered: set[str] = set()
        self._blocks_seen: dict[str, int] = {}  # API message id -> blocks received as AssistantMessages
        self._partial: dict[int, dict] = {}  # index -> {"kind", "text"} of the API message streaming now
        self._partial_id: str | None = None

    def add(self, item) -> None:
        from claude_agent_sdk import AssistantMessage, ResultMessage, StreamEvent, UserMessage

        if isinstance(item, StreamEvent):
            self._event(item.event)
        elif isinstance(item, AssistantMessage):
            self._assistant(item)
        elif isinstance(item, UserMessage):
            self._user(item)
        elif isinstance(item, ResultMessage):
            self.result = {
                "subtype": item.subtype,
                "is_error": item.is_error,
                "session_id": item.session_id,
                "stop_reason": item.stop_reason,
                "total_cost_usd": item.total_cost_usd,
                "usage": item.usage or {},
                "num_turns": item.num_turns,
                "result": item.result,
                "errors": getattr(item, "errors", None),
                "api_error_status": getattr(item, "api_error_status", None),
            }

    def _event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._partial_id = (event.get("message") or {}).get("id")
            self._partial = {}
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self._partial[event.get("index", 0)] = {"kind": block.get("type"), "text": ""}
            if block.get("type") == "thinking":
                self.stream.emit({"type": "thinking_start"})
            elif block.get("type") == "tool_use":
                self.stream.emit({"type": "tool_call_start", "id": block.get("id"), "name": block.get("name")})
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            entry = self._partial.get(event.get("index", 0))
            if delta.get("type") == "text_delta":
                if entry is not None:
                    entry["text"] += delta.get("text", "")
                self.stream.emit({"type": "text_delta", "text": delta.get("text", "")})
        elif kind == "content_block_stop":
            entry = self._partial.get(event.get("index", 0))
            if entry is not None and entry["kind"] == "thinking":
                self.stream.emit({"type": "thinking_end"})

    def _assistant(self, item) -> None:
        from claude_agent_sdk import TextBlock, ThinkingBlock, ToolUseBlock

        blocks = []
        for block in item.content:
            if isinstance(block, TextBlock):
                blocks.append(text_block(block.text))
            elif isinstance(block, ThinkingBlock):
                thinking = {"type": "thinking", "text": block.thinking, "signature": block.signature or None}
                blocks.append({**thinking, "provider": PROVIDER})
            elif isinstance(block, ToolUseBlock):
                self.call_names[block.id] = block.name
                blocks.append(tool_call_block(id=block.id, name=block.name, arguments_raw=json.dumps(block.input)))
            else:  # a block kind this version does not model: kept as observed, under its own type
                data = getattr(block, "__dict__", {})
                data = json.loads(json.dumps(data, default=str))
                blocks.append({"type": f"claude_code_{type(block).__name__}", "data": data})
        message_id = item.message_id or ""
        self._blocks_seen[message_id] = self._blocks_seen.get(message_id, 0) + len(item.content)
        last = self.observed[-1] if self.observed else None
        # The SDK hands one AssistantMessage per content block; the API message they belong to is one message.
        if last is not None and last["role"] == "assistant" and message_id and last["meta"]["message_id"] == message_id:
            last["blocks"].extend(blocks)
            if item.usage:
                last["usage"] = item.usage
            return
        message = {"role": "assistant", "blocks": blocks, "meta": {"message_id": message_id, "model": item.model}}
        if item.usage:
            message["usage"] = item.usage
        self.observed.append(message)

    def _user(self, item) -> None:
        from claude_agent_sdk import ToolResultBlock

        if not isinstance(item.content, list):
            return  # the prompt (already the firing's user message) or a runtime-injected text
        for block in item.content:
            if not isinstance(block, ToolResultBlock):
                continue
            content = block.content
            if isinstance(content, list):
                content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
            self.answered.add(block.tool_use_id)
            self.observed.append(
                tool_result_message(
                    tool_call_id=block.tool_use_id,
                    name=self.call_names.get(block.tool_use_id, ""),
                    content=content or "",
                    is_error=bool(block.is_error),
                )
            )

    def finish(
        self,
        request: ChatRequest,
        *,
        session_id: str,
        resumed: bool,
        note: str | None,
        previous_cost: float,
        transcript: str,
        stopped: bool,
        timed_out: bool,
    ) -> ChatResult:
        observed = self.observed
        if stopped:
            seen = self._blocks_seen.get(self._partial_id or "", 0)
            partial = [
                text_block(entry["text"], stopped=True)
                for index, entry in sorted(self._partial.items())
                if index >= seen and entry["kind"] == "text" and entry["text"]
            ]
            if partial:
                last = observed[-1] if observed else None
                if last is not None and last["role"] == "assistant" and last["meta"]["message_id"] == self._partial_id:
                    last["blocks"].extend(partial)
                else:
                    meta = {"message_id": self._partial_id or ""}
                    observed.append({"role": "assistant", "blocks": partial, "meta": meta})
            # Calls the run made but whose answer never arrived: say so, so the list stays a valid conversation.
            tail: list[dict] = []
            for message in observed:
                for block in message["blocks"]:
                    if block.get("type") == "tool_call" and block["id"] not in self.answered:
                        tail.append(
                            tool_result_message(
                                tool_call_id=block["id"],
                                name=block["name"],
                                content="No result observed: the run was stopped before this tool answered.",
                                is_error=True,
                            )
                        )
            if tail:
                observed.extend(tail)
        if not observed or observed[-1]["role"] != "assistant":
            # Every firing's list ends with an answer: after tool results with no final text, an empty stopped one.
            blocks = [text_block("", stopped=True)] if stopped else []
            observed.append({"role": "assistant", "blocks": blocks, "meta": {}})
        result = self.result or {}
        raw = result.get("usage") or {}
        cached = int(raw.get("cache_read_input_tokens") or 0)
        usage = Usage(
            input_tokens=int(raw.get("input_tokens") or 0) + cached + int(raw.get("cache_creation_input_tokens") or 0),
            cached_tokens=cached,
            output_tokens=int(raw.get("output_tokens") or 0),
            estimated=not raw,
        )
        total_cost = result.get("total_cost_usd")
        if total_cost is not None:
            # Cumulative over the session (resume included): this run cost the difference.
            usage.cost_usd = round(max(float(total_cost) - previous_cost, 0.0), 6)
        final = observed[-1]
        final["meta"] = {
            **final.get("meta", {}),
            "runtime": {
                "runtime": PROVIDER,
                "session_id": session_id,
                "resumed": resumed,
                **({"note": note} if note else {}),
                **({"end_reason": "max_wall_time"} if timed_out else {}),
            },
        }
        final["usage"] = usage.to_dict()
        stop_reason = (
            "stopped"
            if stopped
            else {"end_turn": "end_turn", "max_tokens": "max_tokens"}.get(result.get("stop_reason") or "", "other")
        )
        return ChatResult(
            message=final,
            usage=usage,
            stop_reason=stop_reason,
            provider_ids={
                "session_id": session_id,
                "resumed": resumed,
                "transcript_path": transcript,
                "session_cost_usd": total_cost if total_cost is not None else previous_cost,
                "num_turns": result.get("num_turns"),
            },
            observed=observed,
        )
