"""Fake Gemini API (models/{m}:streamGenerateContent?alt=sse and :countTokens) with its thought-signature rules."""

from __future__ import annotations

import base64
import hashlib
import json

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
from .media import BadMedia, b64decode, sniff

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
}
# The documented escape value is compared as the literal text of the thoughtSignature field.
SKIP_SIGNATURE = "skip_thought_signature_validator"
THINKING_LEVEL_UNSUPPORTED = "Thinking level is not supported for this model."
BUDGET_ZERO_REFUSED = "Budget 0 is invalid. This model only works in thinking mode."
BOTH_THINKING_KNOBS = "You can only set only one of thinking budget and thinking level."
MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
    "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
    "call `default_api:{name}` , position {position}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
# The image and document understanding guides: the MIME types inline data may have (images: PNG, JPEG, WebP, HEIC,
# HEIF; documents: PDF and text types), and the inline request limit (larger files go through the Files API).
INLINE_TYPES = (
    "image/png", "image/jpeg", "image/webp", "image/heic", "image/heif",
    "application/pdf", "text/plain", "text/csv", "text/html", "text/css", "text/xml", "text/rtf", "text/md",
    "text/javascript", "application/x-javascript", "text/x-python", "application/x-python",
)  # fmt: skip
MAX_INLINE_BYTES = 100 * 1024 * 1024
COUNT_MISMATCH = (
    "Please ensure that the number of function response parts is equal to the number of function call parts of the "
    "function call turn."
)


def decode_signature(value: str) -> bytes:
    """Signatures arrive standard or URL-safe base64 (the SDK re-encodes URL-safe); compare the bytes."""
    padded = value + "=" * (-len(value) % 4)
    return base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def thinking_config(body: dict) -> dict:
    """The request's thinkingConfig with camelCase keys, whichever spelling was sent."""
    raw = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    return {_camel(key): value for key, value in raw.items()}


def _split(text: str) -> list[str]:
    middle = max(1, len(text) // 2)
    return [text[:middle], text[middle:]] if len(text) > 1 else [text]


class FakeGemini(FakeProviderServer):
    provider = "gemini"

    def __init__(self) -> None:
        super().__init__()
        # signature bytes -> the model that issued it: a signature validates only for that model.
        self.issued_signatures: dict[bytes, str] = {}
        self.issued_continuations: dict[str, str] = {}  # continuation token -> model
        self.cumulative_usage = True  # usageMetadata on every chunk, as running totals (the API's streaming form)
        self.blocked_texts: set[str] = set()  # the user words of each blocked prompt: blocked again when resent
        self.uploaded: dict[str, dict] = {}  # Files API: file uri -> the File resource and its bytes
        self.pending_uploads: dict[str, dict] = {}
        self.max_inline_bytes = MAX_INLINE_BYTES  # lowered by a test to exercise the Files API path

    def _signature(self, seed: str, explicit: str | None = None) -> str:
        value = explicit or base64.b64encode(hashlib.sha256(seed.encode()).digest() + b"\xfb\xff\xfe").decode()
        return value

    def handle_other(self, request: RecordedRequest) -> RawReply | None:
        if request.method == "GET" and request.path.endswith("/models"):
            if self.key_refused(request):
                return self.render_error(
                    ErrorReply(400, "API key not valid. Please pass a valid API key.", kind="INVALID_ARGUMENT")
                )
            return json_reply(200, {"models": [{"name": "models/gemini-2.5-pro", "displayName": "Gemini 2.5 Pro"}]})
        if request.path in ("/upload/v1beta/files", "/upload/v1/files"):
            return self._upload(request)
        if request.path.endswith(":countTokens"):
            self._check_key(request)
            return json_reply(200, {"totalTokens": max(1, len(json.dumps(request.body)) // 4)})
        return None

    def _check_key(self, request: RecordedRequest) -> None:
        if not request.headers.get("x-goog-api-key"):
            raise Rejected(
                ErrorReply(
                    403,
                    (
                        "Method doesn't allow unregistered callers (callers without established identity). Please "
                        "use API Key or other form of API consumer identity to call this API."
                    ),
                )
            )

    def validate(self, request: RecordedRequest) -> None:
        if not request.path.endswith(":streamGenerateContent") or request.query.get("alt") != ["sse"]:
            raise Rejected(ErrorReply(404, f"Not found: {request.path}"))
        self._check_key(request)
        body = request.body or {}
        model = request.path.rsplit("/", 1)[-1].split(":")[0]
        self._check_thinking(model, (body.get("generationConfig") or {}).get("thinkingConfig"))
        token = body.get("continuationToken")
        if token is not None and self.issued_continuations.get(token) != model:
            raise Rejected(ErrorReply(400, "Invalid continuation token."))
        contents = body.get("contents") or []
        # The current turn starts after the last user content that is not only function responses.
        start = 0
        for index, content in enumerate(contents):
            parts = content.get("parts") or []
            if content.get("role") == "user" and any("functionResponse" not in p for p in parts):
                start = index + 1
        self._check_media(contents)
        for index, content in enumerate(contents):
            parts = content.get("parts") or []
            calls = [p for p in parts if "functionCall" in p]
            for p_index, part in enumerate(parts):
                if "functionCall" in part and not isinstance(part["functionCall"].get("args", {}), dict):
                    raise Rejected(
                        ErrorReply(
                            400,
                            f"Invalid value at 'contents[{index}].parts[{p_index}].function_call.args' "
                            "(type.googleapis.com/google.protobuf.Struct)",
                        )
                    )
                signature = part.get("thoughtSignature")
                if signature is not None and signature != SKIP_SIGNATURE:
                    try:
                        raw = decode_signature(signature)
                    except ValueError:
                        raw = b""
                    # Bound to the model that issued it: another model cannot validate it.
                    if self.issued_signatures.get(raw) != model:
                        raise Rejected(ErrorReply(400, "Thought signature is not valid."))
            if content.get("role") == "model" and calls:
                if index >= start and "thoughtSignature" not in calls[0]:
                    name = calls[0]["functionCall"].get("name")
                    raise Rejected(ErrorReply(400, MISSING_SIGNATURE.format(name=name, position=index + 1)))
                nxt = contents[index + 1] if index + 1 < len(contents) else None
                responses = [p for p in (nxt or {}).get("parts", []) if "functionResponse" in p]
                if nxt is not None and len(responses) != len(calls):
                    raise Rejected(ErrorReply(400, COUNT_MISMATCH))

    def _upload(self, request: RecordedRequest) -> RawReply:
        """The Files API's resumable upload: a `start` command with the file's metadata answers the upload URL in
        `x-goog-upload-url`; `upload` commands append the bytes at `x-goog-upload-offset`; `finalize` answers the
        File (ACTIVE: images and PDFs need no processing) with `x-goog-upload-status: final`."""
        command = request.headers.get("x-goog-upload-command", "")
        if command == "start":
            self._check_key(request)  # the upload URL it answers is the session's credential from then on
            upload_id = self.next_id("upload")
            meta = (request.body or {}).get("file") or {}
            self.pending_uploads[upload_id] = {"meta": meta, "data": bytearray()}
            url = f"{self.root_url}{request.path}?upload_id={upload_id}"
            return RawReply(200, b"{}", {"x-goog-upload-url": url, "x-goog-upload-status": "active"})
        upload_id = (request.query.get("upload_id") or [""])[0]
        pending = self.pending_uploads.get(upload_id)
        if pending is None or int(request.headers.get("x-goog-upload-offset", -1)) != len(pending["data"]):
            return self.render_error(ErrorReply(400, "Invalid upload offset or session."))
        pending["data"] += request.raw
        if "finalize" not in command:
            return RawReply(200, b"", {"x-goog-upload-status": "active"})
        del self.pending_uploads[upload_id]
        name = f"files/{upload_id.replace('_', '-')}"
        meta = pending["meta"]
        file = {
            "name": name,
            "displayName": meta.get("displayName") or meta.get("display_name"),
            "mimeType": meta.get("mimeType") or meta.get("mime_type"),
            "sizeBytes": str(len(pending["data"])),
            "uri": f"{self.root_url}/v1beta/{name}",
            "state": "ACTIVE",
        }
        self.uploaded[file["uri"]] = {**file, "data": bytes(pending["data"])}
        return RawReply(200, json.dumps({"file": file}).encode(), {"x-goog-upload-status": "final"})

    def _check_media(self, contents: list[dict]) -> None:
        inline = 0
        for index, content in enumerate(contents):
            for p_index, part in enumerate(content.get("parts") or []):
                blob = part.get("inlineData") or part.get("inline_data")
                where = f"contents[{index}].parts[{p_index}]"
                if blob is not None:
                    mime = blob.get("mimeType") or blob.get("mime_type")
                    if mime not in INLINE_TYPES and not str(mime).startswith(("audio/", "video/")):
                        raise Rejected(ErrorReply(400, f"Unsupported MIME type: {mime}"))
                    try:
                        data = b64decode(blob.get("data"))
                    except BadMedia:
                        raise Rejected(
                            ErrorReply(400, f"Invalid value at '{where}.inline_data.data' (TYPE_BYTES)")
                        ) from None
                    if str(mime).startswith("image/") and sniff(data) not in (mime, None):
                        raise Rejected(
                            ErrorReply(
                                400,
                                "Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
                            )
                        )
                    inline += len(data)
                file_data = part.get("fileData") or part.get("file_data")
                if file_data is not None:
                    uri = file_data.get("fileUri") or file_data.get("file_uri")
                    if uri not in self.uploaded:
                        raise Rejected(
                            ErrorReply(
                                403,
                                f"You do not have permission to access the File {uri} or it may not exist.",
                                kind="PERMISSION_DENIED",
                            )
                        )
        if inline > self.max_inline_bytes:
            raise Rejected(ErrorReply(400, f"Request payload size exceeds the limit: {self.max_inline_bytes} bytes."))

    @staticmethod
    def _check_thinking(model: str, thinking: dict | None) -> None:
        """Per the Gemini thinking docs: 2.5 models take thinkingBudget (2.5 Pro cannot turn thinking off), 3.x
        models take thinkingLevel (the budget is accepted for compatibility); never both."""
        if not thinking:
            return
        # The API takes proto field names in either spelling (the SDK sends thinking_budget / thinking_level).
        thinking = {_camel(key): value for key, value in thinking.items()}
        if "thinkingLevel" in thinking and "thinkingBudget" in thinking:
            raise Rejected(ErrorReply(400, BOTH_THINKING_KNOBS))
        generation = model.removeprefix("gemini-").split("-")[0]
        try:
            major = float(generation)
        except ValueError:
            major = 99.0
        if "thinkingLevel" in thinking and major < 3:
            raise Rejected(ErrorReply(400, THINKING_LEVEL_UNSUPPORTED))
        if thinking.get("thinkingBudget") == 0 and model.startswith("gemini-2.5-pro"):
            raise Rejected(ErrorReply(400, BUDGET_ZERO_REFUSED))

    def render_error(self, error: ErrorReply) -> RawReply:
        body = {
            "error": {
                "code": error.status,
                "message": error.message,
                "status": error.kind or STATUS_NAMES.get(error.status, "INTERNAL"),
            }
        }
        return json_reply(error.status, body, error.headers)

    def render(self, request: RecordedRequest, turn: Turn) -> SSE:
        response_id = self.next_id("gresp")
        model = request.path.rsplit("/", 1)[-1].split(":")[0]
        frames: list[bytes] = []
        labels: list[str] = []
        body = request.body if isinstance(request.body, dict) else {}
        user_texts = {
            p.get("text")
            for c in body.get("contents") or []
            if c.get("role") == "user"
            for p in c.get("parts") or []
            if "text" in p
        }
        if user_texts & self.blocked_texts:
            turn = Turn([], stop="blocked", input_tokens=turn.input_tokens)  # the blocked prompt is still there
        if turn.stop == "blocked":
            last_user = next((c for c in reversed(body.get("contents") or []) if c.get("role") == "user"), {})
            self.blocked_texts |= {p.get("text") for p in last_user.get("parts") or [] if "text" in p}
            # GenerateContentResponse for a blocked prompt: `promptFeedback.blockReason` set and no candidates;
            # the prompt's tokens are still counted in usageMetadata.
            data = {
                "promptFeedback": {
                    "blockReason": turn.block_reason,
                    "safetyRatings": [
                        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
                    ],
                },
                "usageMetadata": {"promptTokenCount": turn.input_tokens, "totalTokenCount": turn.input_tokens},
                "modelVersion": model,
                "responseId": response_id,
            }
            return SSE([sse_frame(data)])

        total_chunks = max(1, sum(2 if not isinstance(p, Call) else 1 for p in turn.parts)) + 1
        emitted = 0

        def chunk(parts: list[dict] | None, label: str = "", finish: str | None = None, usage: bool = False) -> None:
            nonlocal emitted
            emitted += 1
            candidate: dict = {"index": 0}
            if parts is not None:
                candidate["content"] = {"role": "model", "parts": parts}
            if finish:
                candidate["finishReason"] = finish
            if finish == "CONTINUATION":
                token = base64.b64encode(f"cont:{response_id}".encode()).decode()
                self.issued_continuations[token] = model
                candidate["continuationToken"] = token
            data: dict = {"candidates": [candidate], "modelVersion": model, "responseId": response_id}
            if usage or self.cumulative_usage:
                # Running totals of this response so far; the last chunk carries the final numbers.
                share = min(1.0, emitted / total_chunks) if not usage else 1.0
                candidates = round((turn.output_tokens - turn.reasoning_tokens) * share)
                thoughts = round(turn.reasoning_tokens * share)
                data["usageMetadata"] = {
                    "promptTokenCount": turn.input_tokens,
                    "cachedContentTokenCount": turn.cached_tokens,
                    "candidatesTokenCount": candidates,
                    "thoughtsTokenCount": thoughts,
                    "totalTokenCount": turn.input_tokens + candidates + thoughts,
                }
            frames.append(sse_frame(data))
            labels.append(label)

        has_call = any(isinstance(p, Call) for p in turn.parts)
        has_think = any(isinstance(p, Think) for p in turn.parts)
        first_call = True
        last_text = max((i for i, p in enumerate(turn.parts) if isinstance(p, Text)), default=None)
        for index, part in enumerate(turn.parts):
            if isinstance(part, Think):
                pieces = _split(part.text)
                for n, piece in enumerate(pieces):
                    body = {"text": piece, "thought": True}
                    if part.signature and n == len(pieces) - 1:
                        body["thoughtSignature"] = part.signature
                        self.issued_signatures[decode_signature(part.signature)] = model
                    chunk([body], "thinking_delta")
            elif isinstance(part, Text):
                pieces = _split(part.text)
                signature = part.signature
                if signature is None and index == last_text and has_think and not has_call:
                    signature = self._signature(f"{response_id}:text:{part.text}")
                for n, piece in enumerate(pieces):
                    body = {"text": piece}
                    if signature and n == len(pieces) - 1:
                        body["thoughtSignature"] = signature
                        self.issued_signatures[decode_signature(signature)] = model
                    chunk([body], "text_delta")
            elif isinstance(part, Call):
                call = {"name": part.name, "args": json.loads(part.arguments)}
                if part.id:
                    call["id"] = part.id
                body = {"functionCall": call}
                if first_call:
                    signature = self._signature(f"{response_id}:call:{part.name}:{index}", part.signature)
                    body["thoughtSignature"] = signature
                    self.issued_signatures[decode_signature(signature)] = model
                    first_call = False
                chunk([body], "tool_call_delta")
            else:
                raise AssertionError(f"gemini fake cannot render {part!r}")
        finish = {"max_tokens": "MAX_TOKENS", "continuation": "CONTINUATION"}.get(turn.stop or "", "STOP")
        chunk(None, "terminal", finish=finish, usage=True)
        return stream_of(frames, labels, turn)
