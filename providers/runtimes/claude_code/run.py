"""One Claude Code query: the SDK's client on a thread of its own, its messages pumped to the collector, Stop and the
wall-clock limit SIGKILLing the CLI's process group, and the run's failures as provider errors."""

from __future__ import annotations

import asyncio
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

from ...errors import AuthError, NetworkError, ProviderError, RateLimitedError, ServerError
from ...types import ChatRequest, ChatResult
from .. import (
    RuntimeRun,
    attached_files_note,
    attachment_paths,
    new_message_files,
    split_request,
    write_attachments,
)
from .collector import Collector
from .launch import expected_exit, kill_on_purpose, prepare_launch, wait_gone
from .session import PROVIDER, session_for, transcript_path

_END = object()


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
    session = session_for(run, history, user_text, attachment_paths(request.messages))
    options_kwargs, control = prepare_launch(request, run, system, session)
    # The conversation's files go into the (emptied) working directory on every run, so a resumed session finds
    # the ones its transcript names; the new message's are named in the prompt.
    written = write_attachments(request.messages, Path(options_kwargs["cwd"]))
    note = attached_files_note(new_message_files(request.messages), written)
    if note:
        session = replace(session, prompt=session.prompt + note)
    inbox: queue.Queue = queue.Queue()

    def produce() -> None:
        async def main() -> None:
            async with ClaudeSDKClient(ClaudeAgentOptions(**options_kwargs)) as client:
                await client.query(session.prompt)
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

    def stop_run() -> None:
        kill_on_purpose(control, worker.ident)

    def items():
        while True:
            try:
                item, error = inbox.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() >= deadline:
                    timed_out["value"] = True
                    stop_run()
                    return
                continue
            if item is _END:
                if error is not None:
                    raise error
                return
            yield item

    worker = threading.Thread(target=produce, name="claude-code-run", daemon=True)
    worker.start()
    collector = Collector(stream)
    error: BaseException | None = None
    try:
        for item in stream.pump(items(), close=stop_run):
            collector.add(item)
    except BaseException as exc:
        error = exc
    stopped = stream.stop_requested or timed_out["value"]
    if stopped:
        stop_run()  # at once, not best-effort later: the run must not outlive its step
    worker.join(timeout=10)
    wait_gone(control)
    expected_exit.forget(worker.ident)
    if error is not None and not stopped:
        raise _map_error(error) from error
    if collector.result is not None and collector.result.get("is_error") and not stopped:
        raise _result_error(collector.result)
    if not stopped and collector.result is None:
        raise ServerError("Claude Code ended without a result", provider=PROVIDER)
    return collector.finish(
        request,
        session_id=session.session_id,
        resumed=session.resumed,
        note=session.note,
        previous_cost=session.previous_cost,
        transcript=str(transcript_path(home, session.session_id)),
        stopped=stopped,
        timed_out=timed_out["value"],
    )


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
