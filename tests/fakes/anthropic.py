"""Fake Anthropic Messages API (POST /v1/messages with SSE; /v1/messages/count_tokens) with its replay rules."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace

from .base import (
    SSE,
    Call,
    ErrorReply,
    FakeProviderServer,
    RawReply,
    RecordedRequest,
    Rejected,
    Text,
    Think,
    Turn,
    json_reply,
    sse_frame,
    stream_of,
)
from .media import BadMedia, b64decode, pdf_pages, sniff

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

THINKING_FIRST = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` "
    "is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of "
    "`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid "
    "this requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)


ENABLED_REFUSED = (
    '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and '
    '"output_config.effort" to control thinking behavior.'
)
ADAPTIVE_REFUSED = "adaptive thinking is not supported on this model"
TEMPERATURE_DEPRECATED = "`temperature` is deprecated for this model."
TEMPERATURE_WITH_THINKING = (
    "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#important-considerations-when-using-extended-thinking"
)
FINAL_THINKING = "messages.{i}: The final block in an assistant message cannot be `thinking`."
TOO_MANY_BREAKPOINTS = "A maximum of 4 blocks with cache_control may be provided. Found {n}."
CACHE_LOOKBACK_BLOCKS = 20
# Vision guide: JPEG, PNG, GIF and WebP, at most 5 MB each (as sent, base64). PDF support guide: a document block
# with a base64 `application/pdf` source or a plain-text source (`text/plain`), at most 100 pages per request.
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_IMAGE_BASE64 = 5 * 1024 * 1024
MAX_PDF_PAGES = 100


def model_version(model: str) -> tuple[int, int]:
    """(major, minor) from a Claude model id, as the models overview names them: claude-<family>-<major>-<minor>
    (a trailing 8-digit date is not a version) or the older claude-<major>-<minor>-<family>. Names without a
    number (claude-mythos-preview) are the newest generation."""
    numbers = [int(t) for t in model.split("-") if t.isdigit() and len(t) < 8]
    if not numbers:
        return (99, 0)
    return (numbers[0], numbers[1] if len(numbers) > 1 else 0)


def adaptive_only(model: str) -> bool:
    # Opus 4.7 and later, every Claude 5 model, Mythos and Fable: adaptive thinking only; they also reject
    # sampling parameters such as temperature.
    return model_version(model) >= (4, 7) or "mythos" in model or "fable" in model


def _split(text: str) -> list[str]:
    middle = max(1, len(text) // 2)
    return [text[:middle], text[middle:]] if len(text) > 1 else [text]


def _content(message: dict) -> list[dict]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


class FakeAnthropic(FakeProviderServer):
    provider = "anthropic"

    def __init__(self) -> None:
        super().__init__()
        self.issued_thinking: dict[str, str] = {}  # signature -> thinking text it signs
        self.issued_redacted: set[str] = set()
        self.fail_counting = False  # answer count_tokens with a 500, to exercise the estimate fallback
        self.last_breakpoints = 0
        # Prompt caching as the guide describes it, when switched on: a breakpoint writes the prefix up to its
        # block; a later request reads the longest written prefix found at a block boundary at most
        # CACHE_LOOKBACK_BLOCKS before one of its breakpoints (the "about 20 blocks" lookback), and writes the rest.
        # Usage then reports those reads and writes instead of the scripted numbers.
        self.simulate_cache = False
        self.cached_prefixes: set[str] = set()
        self.last_cache: tuple[int, int, int] | None = None  # (input, read, written) of the last request
        # Streaming refusals ("Streaming refusals" guide): after `stop_reason: "refusal"` the conversation context
        # must be reset (the refused turn removed or rephrased); continuing without that gets refusals again.
        # What each refused request's turn held: its user words and the assistant words it produced.
        self.refused_texts: set[str] = set()

    def reject(self, message: str, status: int = 400) -> None:
        raise Rejected(ErrorReply(status, message))

    def handle_other(self, request: RecordedRequest) -> RawReply | None:
        if request.method == "GET" and request.path == "/v1/models":
            if self.key_refused(request):
                return self.render_error(ErrorReply(401, "invalid x-api-key", kind="authentication_error"))
            model = {
                "type": "model",
                "id": "claude-sonnet-4-5",
                "display_name": "Claude Sonnet 4.5",
                "created_at": "2025-09-29T00:00:00Z",
            }
            return json_reply(
                200, {"data": [model], "has_more": False, "first_id": model["id"], "last_id": model["id"]}
            )
        if request.path == "/v1/messages/count_tokens":
            if self.fail_counting:
                return self.render_error(ErrorReply(500, "Internal server error"))
            self.validate(request, counting=True)
            return json_reply(200, {"input_tokens": max(1, len(json.dumps(request.body)) // 4)})
        return None

    def validate(self, request: RecordedRequest, counting: bool = False) -> None:  # noqa: C901 - one rule per branch
        if request.path not in ("/v1/messages", "/v1/messages/count_tokens"):
            self.reject(f"Not Found: {request.path}", 404)
        # This SDK generation sends the key as a bearer token; older ones used x-api-key. Either is accepted.
        if not (request.headers.get("x-api-key") or request.headers.get("authorization", "").startswith("Bearer ")):
            raise Rejected(ErrorReply(401, "x-api-key header is required", kind="authentication_error"))
        body = request.body or {}
        if not counting and not isinstance(body.get("max_tokens"), int):
            self.reject("max_tokens: Field required")
        messages = body.get("messages") or []
        model = str(body.get("model", ""))
        thinking = body.get("thinking") or {}
        thinking_on = thinking.get("type") in ("enabled", "adaptive")
        if thinking.get("type") == "enabled":
            if adaptive_only(model):
                self.reject(ENABLED_REFUSED)
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                self.reject("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
            if not counting and budget >= body.get("max_tokens", 0):
                self.reject("`max_tokens` must be greater than `thinking.budget_tokens`.")
        if thinking.get("type") == "adaptive" and model_version(model) < (4, 6):
            self.reject(ADAPTIVE_REFUSED)
        if "temperature" in body:
            if adaptive_only(model):
                self.reject(TEMPERATURE_DEPRECATED)
            if thinking_on and body["temperature"] != 1:
                self.reject(TEMPERATURE_WITH_THINKING)
        breakpoints = sum(1 for m in messages for b in _content(m) if isinstance(b, dict) and "cache_control" in b)
        system = body.get("system")
        if isinstance(system, list):
            breakpoints += sum(1 for b in system if "cache_control" in b)
        breakpoints += sum(1 for t in body.get("tools") or [] if "cache_control" in t)
        if breakpoints > 4:
            self.reject(TOO_MANY_BREAKPOINTS.format(n=breakpoints))
        self.last_breakpoints = breakpoints
        has_tool_blocks = any(
            block.get("type") in ("tool_use", "tool_result") for m in messages for block in _content(m)
        )
        if has_tool_blocks and not body.get("tools"):
            self.reject("Requests which include `tool_use` or `tool_result` blocks must define tools.")
        pages = 0
        for i, message in enumerate(messages):
            content = _content(message)
            for j, block in enumerate(content):
                kind = block.get("type")
                if kind == "text" and not block.get("text"):
                    self.reject("messages: text content blocks must be non-empty")
                if kind == "thinking":
                    if self.issued_thinking.get(block.get("signature")) != block.get("thinking"):
                        self.reject(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
                if kind == "redacted_thinking" and block.get("data") not in self.issued_redacted:
                    self.reject(f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block")
                if kind == "tool_use" and not isinstance(block.get("input"), dict):
                    self.reject(f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary")
                if kind == "image":
                    self._check_image(f"messages.{i}.content.{j}", block)
                if kind == "document":
                    pages += self._check_document(f"messages.{i}.content.{j}", block)
            if message.get("role") == "assistant" and content:
                if content[-1].get("type") in ("thinking", "redacted_thinking"):
                    self.reject(FINAL_THINKING.format(i=i))
                if any("cache_control" in b for b in content if b.get("type") in ("thinking", "redacted_thinking")):
                    self.reject(f"messages.{i}: cache_control cannot be set on thinking blocks")
            if message.get("role") == "assistant":
                uses = [b.get("id") for b in content if b.get("type") == "tool_use"]
                if uses:
                    nxt = messages[i + 1] if i + 1 < len(messages) else None
                    answered = (
                        {b.get("tool_use_id") for b in _content(nxt) if b.get("type") == "tool_result"}
                        if nxt is not None and nxt.get("role") == "user"
                        else set()
                    )
                    missing = [u for u in uses if u not in answered]
                    if missing and nxt is not None:
                        self.reject(
                            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                            f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                            "`tool_result` block in the next message."
                        )
            if message.get("role") == "user":
                previous = messages[i - 1] if i > 0 else None
                used = (
                    {b.get("id") for b in _content(previous) if b.get("type") == "tool_use"}
                    if previous is not None and previous.get("role") == "assistant"
                    else set()
                )
                for j, block in enumerate(content):
                    if block.get("type") == "tool_result" and block.get("tool_use_id") not in used:
                        self.reject(
                            f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                            "`tool_use` block in the previous message."
                        )
        if pages > MAX_PDF_PAGES:
            self.reject(f"A maximum of {MAX_PDF_PAGES} PDF pages may be provided.")
        if thinking.get("type") == "enabled" and messages and messages[-1].get("role") == "user":
            # The assistant turn in progress starts after the last user message that is more than tool results; a
            # tool loop is one assistant turn, and with (manual) thinking on its first assistant message must start
            # with thinking (later steps of the loop need not, without interleaved thinking). Adaptive thinking
            # decides per step whether to think (it may skip it at low effort) and interleaves it, so a turn under
            # it may begin with a tool call.
            start = 0
            for index, message in enumerate(messages):
                if message.get("role") == "user" and any(b.get("type") != "tool_result" for b in _content(message)):
                    start = index + 1
            in_loop = start < len(messages)
            first_step = next(
                (index for index in range(start, len(messages)) if messages[index].get("role") == "assistant"), None
            )
            if in_loop and first_step is not None:
                first = (_content(messages[first_step]) or [{"type": "none"}])[0]
                if first.get("type") not in ("thinking", "redacted_thinking"):
                    self.reject(THINKING_FIRST.format(i=first_step, found=first.get("type")))

    def _check_image(self, where: str, block: dict) -> None:
        source = block.get("source") or {}
        if source.get("type") == "url":
            return
        if source.get("type") != "base64":
            self.reject(
                f"{where}.image.source: Input tag '{source.get('type')}' found using 'type' does not match any "
                "of the expected tags: 'base64', 'url', 'file'"
            )
        media_type = source.get("media_type")
        if media_type not in IMAGE_TYPES:
            self.reject(
                f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
                "'image/gif' or 'image/webp'"
            )
        if len(source.get("data") or "") > MAX_IMAGE_BASE64:
            self.reject(f"{where}.image.source.base64: image exceeds 5 MB maximum")
        try:
            actual = sniff(b64decode(source.get("data")))
        except BadMedia:
            self.reject(f"{where}.image.source.base64.data: Invalid base64 data")
        if actual != media_type:
            self.reject(
                f"{where}.image.source.base64.data: The image was specified using the {media_type} media "
                f"type, but the image appears to be a {actual} image"
            )

    def _check_document(self, where: str, block: dict) -> int:
        """The page count of a valid document block (a text source counts none)."""
        source = block.get("source") or {}
        kind = source.get("type")
        if kind == "text":
            if source.get("media_type") != "text/plain" or not isinstance(source.get("data"), str):
                self.reject(f"{where}.document.source.text.media_type: Input should be 'text/plain'")
            return 0
        if kind in ("url", "file", "content"):
            return 0
        if kind != "base64":
            self.reject(
                f"{where}.document.source: Input tag '{kind}' found using 'type' does not match any of the "
                "expected tags: 'base64', 'content', 'file', 'text', 'url'"
            )
        if source.get("media_type") != "application/pdf":
            self.reject(f"{where}.document.source.base64.media_type: Input should be 'application/pdf'")
        try:
            return pdf_pages(b64decode(source.get("data")))
        except BadMedia:
            self.reject(f"{where}.document.source.base64.data: The PDF specified was not valid.")
        return 0

    def render_error(self, error: ErrorReply) -> RawReply:
        body = {
            "type": "error",
            "error": {"type": error.kind or ERROR_TYPES.get(error.status, "api_error"), "message": error.message},
            "request_id": "req_fake",
        }
        return json_reply(error.status, body, error.headers)

    def _still_refused(self, body: dict) -> bool:
        texts = {
            b.get("text")
            for m in body.get("messages") or []
            for b in _content(m)
            if isinstance(b, dict) and b.get("type") == "text"
        }
        return bool(texts & self.refused_texts)

    def _remember_refusal(self, body: dict, turn: Turn) -> None:
        messages = body.get("messages") or []
        last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        if last_user is not None:
            self.refused_texts |= {b.get("text") for b in _content(last_user) if b.get("type") == "text"}
        self.refused_texts |= {p.text for p in turn.parts if isinstance(p, Text)}

    def _simulate_cache(self, body: dict) -> tuple[int, int, int]:
        """(input tokens, read from the cache, written to it) for this request, per the prompt-caching guide: the
        prefix order is tools, system, messages; every content block is a boundary."""
        blocks: list[dict] = [dict(t) for t in body.get("tools") or []]
        system = body.get("system")
        blocks += [{"type": "text", "text": system}] if isinstance(system, str) else [dict(b) for b in system or []]
        for message in body.get("messages") or []:
            blocks += [dict(b, role=message.get("role")) for b in _content(message)]
        marks = [i for i, b in enumerate(blocks) if "cache_control" in b]
        for b in blocks:
            b.pop("cache_control", None)
        sizes = [max(1, len(json.dumps(b, sort_keys=True)) // 4) for b in blocks]
        keys, digest = [], hashlib.sha256(str(body.get("model")).encode())
        for b in blocks:
            digest.update(json.dumps(b, sort_keys=True).encode())
            keys.append(digest.copy().hexdigest())
        hit = -1
        for mark in marks:
            for j in range(mark, max(-1, mark - CACHE_LOOKBACK_BLOCKS - 1), -1):
                if keys[j] in self.cached_prefixes:
                    hit = max(hit, j)
                    break
        read = sum(sizes[: hit + 1])
        end = max(marks, default=-1)
        written = max(0, sum(sizes[: end + 1]) - read)
        self.cached_prefixes.update(keys[m] for m in marks)
        return sum(sizes), read, written

    def render(self, request: RecordedRequest, turn: Turn) -> SSE:
        body = request.body or {}
        if self.simulate_cache:
            total, read, written_now = self._simulate_cache(body)
            self.last_cache = (total, read, written_now)
            turn = replace(turn, input_tokens=total, cached_tokens=read, cache_creation_tokens=written_now)
        if self._still_refused(body):
            turn = Turn([], stop="refusal")  # the refused turn is still in the context: refused again
        if turn.stop == "refusal":
            self._remember_refusal(body, turn)
        message_id = self.next_id("msg")
        # Caching is reported only when the request asked for it (cache_control breakpoints).
        written = turn.cache_creation_tokens if self.last_breakpoints else 0
        frames: list[bytes] = []
        labels: list[str] = []

        def emit(data: dict, label: str = "") -> None:
            frames.append(sse_frame(data, data["type"]))
            labels.append(label)

        emit(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "claude-test"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": turn.input_tokens - turn.cached_tokens - written,
                        "cache_read_input_tokens": turn.cached_tokens,
                        "cache_creation_input_tokens": written,
                        "output_tokens": 1,
                    },
                },
            }
        )
        frames.append(sse_frame({"type": "ping"}, "ping"))
        labels.append("")
        has_call = False
        for index, part in enumerate(turn.parts):
            if isinstance(part, Think) and part.redacted:
                data = (
                    part.signature
                    or base64.b64encode(hashlib.sha256(f"{message_id}{index}".encode()).digest()).decode()
                )
                self.issued_redacted.add(data)
                emit(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "redacted_thinking", "data": data},
                    },
                    "thinking_delta",
                )
                emit({"type": "content_block_stop", "index": index})
            elif isinstance(part, Think):
                signature = (
                    part.signature
                    or "EqQB"
                    + base64.b64encode(
                        hashlib.sha256(f"{message_id}:{index}:{part.text}".encode()).digest() * 2
                    ).decode()
                )
                self.issued_thinking[signature] = part.text
                emit(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    }
                )
                for piece in _split(part.text):
                    emit(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "thinking_delta", "thinking": piece},
                        },
                        "thinking_delta",
                    )
                emit(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": signature},
                    }
                )
                emit({"type": "content_block_stop", "index": index})
            elif isinstance(part, Text):
                emit({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
                for piece in _split(part.text):
                    emit(
                        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                        "text_delta",
                    )
                emit({"type": "content_block_stop", "index": index})
            elif isinstance(part, Call):
                has_call = True
                call_id = part.id or self.next_id("toolu")
                emit(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "tool_use", "id": call_id, "name": part.name, "input": {}},
                    }
                )
                for piece in _split(part.arguments) if part.arguments else [""]:
                    emit(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                        "tool_call_delta",
                    )
                emit({"type": "content_block_stop", "index": index})
            else:
                raise AssertionError(f"anthropic fake cannot render {part!r}")
        stop = "max_tokens" if turn.stop == "max_tokens" else "tool_use" if has_call else "end_turn"
        delta: dict = {"stop_reason": stop, "stop_sequence": None}
        if turn.stop == "refusal":
            stop_details = {"type": "refusal", "category": turn.refusal_category}
            stop_details["explanation"] = turn.refusal_explanation
            delta = {"stop_reason": "refusal", "stop_sequence": None, "stop_details": stop_details}
        emit(
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {
                    "output_tokens": turn.output_tokens,
                    "output_tokens_details": {"thinking_tokens": turn.reasoning_tokens},
                },
            }
        )
        emit({"type": "message_stop"}, "terminal")
        return stream_of(frames, labels, turn)
