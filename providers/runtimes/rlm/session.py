"""The parent's side of one RLM run: the channel the child reports on, the backend calls (with the owner's key) and
project tool calls it relays back, Stop and the wall clock, and what the run's end makes of it all."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import threading
import time

from ... import config
from ...adapters.common import Stream
from ...billing import calls_cost
from ...errors import ProviderError, ServerError
from ...types import ChatRequest, ChatResult, Usage
from ...unifier import adapter_for
from ...wire import text_message
from .collector import Collector
from .launch import PROVIDER

LINE_MAX = 16 * 1024 * 1024  # a channel line longer than this ends the run: the child is not behaving
CHANNEL_MAX = 256 * 1024 * 1024  # all lines of one run together (a program can write to the channel itself)
logger = logging.getLogger("providers.rlm")
_END = object()


class Session:
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
        self.call_usages: list[dict] = []  # each backend call's usage, priced one by one
        self.llm_calls = 0
        self.backend_error: ProviderError | None = None
        self.output_tail: list[str] = []
        self.collector = Collector(stream)
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
        with self.usage_lock:
            usage = Usage(
                input_tokens=self.usage.input_tokens,
                cached_tokens=self.usage.cached_tokens,
                output_tokens=self.usage.output_tokens,
                reasoning_tokens=self.usage.reasoning_tokens,
                cache_creation_tokens=self.usage.cache_creation_tokens,
                estimated=self.usage.estimated,
            )
        # Priced as the backend's model, each call on its own and then added (the ledger row is the agent's "rlm"
        # row, with this cost): the summed tokens would cross long-context tiers no single call reached.
        with self.usage_lock:
            calls = list(self.call_usages)
        if not calls:
            return usage
        cost, source = calls_cost(provider=self.options["backend"], model=self.request.model, usages=calls)
        if cost is not None:
            usage.cost_usd = float(cost)
            usage.cost_source = source
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
            self.usage.cache_creation_tokens += result.usage.cache_creation_tokens
            self.call_usages.append(result.usage.to_dict())
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
