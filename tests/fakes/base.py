"""A scriptable local HTTP server the real provider SDKs talk to (127.0.0.1, random port, own thread).

Each provider fake subclasses FakeProviderServer: it validates every request the way the provider does (answering
with the provider's own error text when the request is invalid), records it, and answers with the next scripted
reply rendered in the provider's wire protocol, SSE streaming included. Nothing above HTTP is mocked: the SDK
under test opens a real socket to this server.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HOLD_LIMIT_S = 60.0

# --- the provider-neutral script a test writes -------------------------------------------------------------------


@dataclass
class Think:
    text: str = "Let me think about that."
    signature: str | None = None  # filled in by the fake when None and the protocol signs thinking
    redacted: bool = False


@dataclass
class Text:
    text: str
    phase: str | None = None  # OpenAI Responses only
    signature: str | None = None  # Gemini: a thought signature riding on this text part


@dataclass
class Call:
    name: str
    arguments: str  # the raw argument string the model "emits", malformed JSON allowed
    id: str | None = None
    signature: str | None = None  # Gemini: signature on the functionCall part (filled in when None)
    # OpenAI Responses: the tool group a function belongs to (`{"type": "namespace"}` tools, e.g. an MCP server's).
    namespace: str | None = None


@dataclass
class Turn:
    """One scripted model reply. `cut` ends the stream early: "thinking", "text" or "tool_call" cuts inside the
    first part of that kind (after its first delta), "end" drops only the terminal event(s)."""

    parts: list[Any]
    # provider-neutral: None = natural (end / tool use), "max_tokens"; "continuation" (Gemini: the answer goes on in
    # a follow-up request with the continuation token)
    stop: str | None = None
    input_tokens: int = 21
    cached_tokens: int = 5
    # Input written to the prompt cache: Anthropic reports it only when the request asked (breakpoints); OpenAI's
    # Responses API reports it as `input_tokens_details.cache_write_tokens`.
    cache_creation_tokens: int = 0
    output_tokens: int = 13
    reasoning_tokens: int = 4
    cut: str | None = None
    # Anthropic stop="refusal": the streaming classifier stopped the reply; `stop_details` says why.
    refusal_category: str | None = "cyber"
    refusal_explanation: str | None = "This request could enable cyber harm."
    # Gemini stop="blocked": the prompt was blocked (`promptFeedback.blockReason`), no candidates at all.
    block_reason: str = "PROHIBITED_CONTENT"
    chunk_delay_s: float = 0.0
    pause_after_first_text_s: float = 0.0  # a slow provider: a long silence right after the first text delta
    # The stream waits after its first text delta until the test sets this: a test can look at a streaming answer
    # for as long as it needs, instead of racing a stream that may be over before the page is looked at.
    hold_after_first_text: threading.Event | None = None


@dataclass
class ErrorReply:
    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    kind: str | None = None  # provider-specific error type/status; the fake picks a sensible one when None
    param: str | None = None  # OpenAI: the request field the error names
    code: str | None = None  # OpenAI: the error's code


@dataclass
class RawReply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    raw: bytes = b""  # the body as sent (an upload's bytes)


@dataclass
class SSE:
    """A rendered stream: a list of raw byte frames, and where (frame index) to cut it, if anywhere."""

    frames: list[bytes]
    cut_at: int | None = None
    delay_s: float = 0.0
    pauses: dict[int, float] = field(default_factory=dict)  # frame index -> seconds of silence after it
    holds: dict[int, threading.Event] = field(default_factory=dict)  # frame index -> wait for the event after it


class Rejected(Exception):
    """Raised by a fake's validator: the request is invalid for this provider; `reply` is its real error."""

    def __init__(self, reply: ErrorReply):
        super().__init__(reply.message)
        self.reply = reply


class FakeProviderServer:
    provider = "fake"

    def __init__(self) -> None:
        self.script: deque = deque()
        self.requests: list[RecordedRequest] = []
        self.rejections: list[ErrorReply] = []
        self.valid_keys: set[str] | None = None  # when set, the model list answers 401 for any other key
        self._lock = threading.Lock()
        self._counter = 0
        # Scripted silences (Turn.pause_after_first_text_s, Turn.hold_after_first_text) are counted, so a test can
        # see a stream being silent (`silent`, `wait_until_silent`) instead of timing anything; `close` ends pauses.
        self._silences = 0
        self._silence_began = threading.Event()
        self._resume = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                fake._handle(self)

            def do_GET(self):
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name=f"fake-{self.provider}", daemon=True
        )
        self._thread.start()

    # --- test-facing API ---

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url

    def push(self, *replies: Any) -> None:
        self.script.extend(replies)

    @property
    def last_body(self) -> Any:
        return self.requests[-1].body

    @property
    def silent(self) -> bool:
        """Is a stream in its scripted silence right now (its first text delta written and flushed, the rest
        held back)?"""
        with self._lock:
            return self._silences > 0

    def wait_until_silent(self, timeout: float = 30.0) -> None:
        """Block until a stream has entered its scripted silence (failing the test after `timeout` seconds)."""
        assert self._silence_began.wait(timeout), f"no {self.provider} stream went silent within {timeout}s"

    def close(self) -> None:
        self._resume.set()  # a stream still in its silence ends it now, so its handler thread does not linger
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def next_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}_{self._counter:04d}"

    # --- subclass hooks ---

    def validate(self, request: RecordedRequest) -> None:
        """Raise Rejected with the provider's real error when the request is invalid."""

    def render(self, request: RecordedRequest, turn: Turn) -> SSE | RawReply:
        raise NotImplementedError

    def render_error(self, error: ErrorReply) -> RawReply:
        raise NotImplementedError

    def handle_other(self, request: RecordedRequest) -> RawReply | None:
        """Endpoints that are not a chat turn (token counting); None means "use the script"."""
        return None

    def presented_key(self, request: RecordedRequest) -> str:
        auth = request.headers.get("authorization", "")
        return (
            request.headers.get("x-api-key")
            or request.headers.get("x-goog-api-key")
            or (auth[7:] if auth.startswith("Bearer ") else "")
        )

    def key_refused(self, request: RecordedRequest) -> bool:
        return self.valid_keys is not None and self.presented_key(request) not in self.valid_keys

    # --- plumbing ---

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        split = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        request = RecordedRequest(
            method=handler.command,
            path=split.path,
            query=parse_qs(split.query),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
            raw=raw,
        )
        with self._lock:
            self.requests.append(request)
        try:
            reply = self.handle_other(request)
            if reply is None:
                self.validate(request)
                with self._lock:
                    if not self.script:
                        raise AssertionError(f"{self.provider} fake got a request but has no scripted reply left")
                    scripted = self.script.popleft()
                if isinstance(scripted, ErrorReply):
                    reply = self.render_error(scripted)
                elif isinstance(scripted, (RawReply, SSE)):
                    reply = scripted
                else:
                    reply = self.render(request, scripted)
        except Rejected as rejected:
            self.rejections.append(rejected.reply)
            reply = self.render_error(rejected.reply)
        except AssertionError as exc:
            reply = self.render_error(ErrorReply(500, f"fake server: {exc}"))
        if isinstance(reply, SSE):
            self._write_sse(handler, reply)
        else:
            self._write_raw(handler, reply)

    def _write_raw(self, handler: BaseHTTPRequestHandler, reply: RawReply) -> None:
        handler.send_response(reply.status)
        headers = {"Content-Type": "application/json", **reply.headers}
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(reply.body)))
        handler.end_headers()
        handler.wfile.write(reply.body)
        handler.wfile.flush()

    def _write_sse(self, handler: BaseHTTPRequestHandler, sse: SSE) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        # No Content-Length and Connection: close, so the body ends where the server stops writing: a cut stream
        # looks to the client exactly like a provider whose connection died mid-reply.
        handler.send_header("Connection", "close")
        handler.end_headers()
        frames = sse.frames if sse.cut_at is None else sse.frames[: sse.cut_at]
        try:
            for index, frame in enumerate(frames):
                handler.wfile.write(frame)
                handler.wfile.flush()
                if sse.delay_s:
                    time.sleep(sse.delay_s)
                if index in sse.pauses:
                    self._be_silent(self._resume, sse.pauses[index])
                if index in sse.holds:
                    self._be_silent(sse.holds[index], HOLD_LIMIT_S)  # a test that never releases still ends
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client dropped the stream (Stop): that is allowed
        handler.close_connection = True

    def _be_silent(self, until: threading.Event, seconds: float) -> None:
        with self._lock:
            self._silences += 1
        self._silence_began.set()
        try:
            until.wait(seconds)
        finally:
            with self._lock:
                self._silences -= 1


def sse_frame(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> RawReply:
    return RawReply(status, json.dumps(body).encode(), headers or {})


def cut_index(frames_meta: list[str], cut: str | None) -> int | None:
    """Given a label per frame ("thinking_delta", "text_delta", "tool_call_delta", "terminal", ...), return the
    frame index to cut at for Turn.cut: just after the first delta of the chosen kind, or before the terminal."""
    if cut is None:
        return None
    if cut == "end":
        return frames_meta.index("terminal")
    label = {"thinking": "thinking_delta", "text": "text_delta", "tool_call": "tool_call_delta"}[cut]
    if label not in frames_meta:
        raise AssertionError(f"cannot cut at {cut!r}: the turn has no such part")
    return frames_meta.index(label) + 1


def stream_of(frames: list[bytes], labels: list[str], turn: Turn) -> SSE:
    pauses = {}
    if turn.pause_after_first_text_s and "text_delta" in labels:
        pauses[labels.index("text_delta")] = turn.pause_after_first_text_s
    holds = {}
    if turn.hold_after_first_text is not None and "text_delta" in labels:
        holds[labels.index("text_delta")] = turn.hold_after_first_text
    return SSE(frames, cut_index(labels, turn.cut), turn.chunk_delay_s, pauses, holds)
