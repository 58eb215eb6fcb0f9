"""Fake OpenAI Responses API (POST /v1/responses, SSE streaming) with the provider's replay rules."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import time

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
from .media import BadMedia, data_url, sniff
from .openai_models import model_list

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "rate_limit_error"}


NOT_PERSISTED = (
    "Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` "
    "set to true, or remove this item from your input."
)
UNSUPPORTED_PARAMETER = "Unsupported parameter: '{name}' is not supported with this model."
UNSUPPORTED_EFFORT = (
    "Unsupported value: 'reasoning.effort' does not support '{value}' with this model. Supported values are: {allowed}."
)
EMBEDDING_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
INVALID_INPUT = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
CUT_OFF = "(cut off by max_output_tokens)"  # a reasoning item whose following item never came
# The 400 an organisation that has not been verified gets for `reasoning.summary` (reported verbatim on the
# trackers of OpenAI's own cookbook and of other agents: param `reasoning.summary`, code `unsupported_value`).
UNVERIFIED_SUMMARY = (
    "Your organization must be verified to generate reasoning summaries. Please go to: "
    "https://platform.openai.com/settings/organization/general and click on Verify Organization. If you just "
    "verified, it can take up to 15 minutes for access to propagate."
)


# The images guide: PNG, JPEG, WEBP and non-animated GIF; a request carries at most 50 MB of them and 500 images.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
IMAGE_DETAILS = ("low", "high", "auto", "original")
MAX_PAYLOAD = 50 * 1024 * 1024
# The file inputs guide lists what `input_file` takes: PDF, text and code, rich documents, spreadsheets.
FILE_EXTENSIONS = (
    ".pdf",
    ".txt",
    ".md",
    ".json",
    ".html",
    ".xml",
    ".csv",
    ".tsv",
    ".xlsx",
    ".xls",
    ".docx",
    ".pptx",
    ".py",
    ".js",
)
CONTENT_TYPES = ("input_text", "input_image", "input_file")
# Models without vision take no images and no PDFs (the models pages: gpt-3.5-turbo, o1-mini, gpt-4-0613, audio).
TEXT_ONLY_MODELS = ("gpt-3.5", "o1-mini", "gpt-4-0613", "gpt-audio")


def reasoning_model(model: str) -> bool:
    """The reasoning models of the models page: the o-series, codex, computer-use and GPT-5 and later, except the
    chat snapshots (gpt-5-chat-latest, gpt-5.x-chat-latest), which do not reason."""
    if "-chat" in model:
        return False
    return model.startswith(("o1", "o3", "o4", "gpt-5", "gpt-6", "codex", "computer-use"))


def effort_values(model: str) -> list[str]:
    if model.startswith(("o1", "o3", "o4", "codex", "computer-use")):
        return ["low", "medium", "high"]
    if model.startswith("gpt-5") and not model.startswith("gpt-5."):
        return ["minimal", "low", "medium", "high"]
    return ["none", "low", "medium", "high", "xhigh"]


def _split(text: str) -> list[str]:
    middle = max(1, len(text) // 2)
    return [text[:middle], text[middle:]] if len(text) > 1 else [text]


class FakeOpenAIResponses(FakeProviderServer):
    provider = "openai"

    def __init__(self) -> None:
        super().__init__()
        # What this "provider" handed out, so replays can be checked the way the real service checks them.
        self.issued_reasoning: dict[str, dict] = {}
        self.issued_calls: set[str] = set()
        self.outputs: list[list[dict]] = []  # each rendered turn's output items, as sent
        self.embedding_errors: list[ErrorReply] = []  # the next embeddings calls answer these, in order
        self.embedding_inputs: list[list[str]] = []  # the inputs of each embeddings call answered
        self.embeddings_reversed = False  # answer the rows last input first: the API pairs them by `index` only
        self.unverified_keys: set[str] = set()  # keys of organisations that may not have reasoning summaries

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def handle_other(self, request: RecordedRequest) -> RawReply | None:
        if request.method == "GET" and request.path == "/v1/models":
            return model_list(self, request, "gpt-5")
        if request.path == "/v1/embeddings":
            return self.embeddings(request)
        if request.path == "/v1/responses/input_tokens":
            self.validate(request, path="/v1/responses/input_tokens")
            tokens = max(1, len(json.dumps(request.body)) // 4)
            return json_reply(200, {"object": "response.input_tokens", "input_tokens": tokens})
        return None

    # --- embeddings (POST /v1/embeddings), with the rules of the API reference ---

    def embeddings(self, request: RecordedRequest) -> RawReply:
        """Deterministic vectors (a hash of each input), usage as the API reports it (`prompt_tokens`,
        `total_tokens`, summed over the inputs), `encoding_format` float or base64 (the SDK asks for base64 unless
        told otherwise). Refuses what the API refuses: an empty input or an empty string in it, more than 2,048
        inputs, an input over 8,192 tokens, `dimensions` on a model before text-embedding-3, an unknown model."""
        body = request.body if isinstance(request.body, dict) else {}
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return self.render_error(ErrorReply(401, "You didn't provide an API key."))
        if self.key_refused(request):
            return self.render_error(ErrorReply(401, "Incorrect API key provided."))
        if self.embedding_errors:
            return self.render_error(self.embedding_errors.pop(0))
        model = body.get("model")
        if model not in EMBEDDING_DIMS:
            return self.render_error(
                ErrorReply(
                    404,
                    f"The model `{model}` does not exist or you do not have access to it.",
                    kind="invalid_request_error",
                )
            )
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if (
            not isinstance(inputs, list)
            or not inputs
            or len(inputs) > 2048
            or any(not isinstance(text, str) or not text for text in inputs)
        ):
            return self.render_error(ErrorReply(400, INVALID_INPUT))
        tokens = [max(1, len(text) // 4) for text in inputs]
        if max(tokens) > 8192:
            return self.render_error(
                ErrorReply(
                    400,
                    f"This model's maximum context length is 8192 tokens, however you requested {max(tokens)} "
                    "tokens. Please reduce your prompt; or completion length.",
                )
            )
        dims = body.get("dimensions")
        if dims is not None and not model.startswith("text-embedding-3"):
            return self.render_error(ErrorReply(400, "This model does not support specifying dimensions."))
        dims = dims or EMBEDDING_DIMS[model]
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            return self.render_error(
                ErrorReply(400, f"Invalid value: '{encoding}'. Supported values are: 'float' and 'base64'.")
            )
        data = []
        for index, text in enumerate(inputs):
            vector = self.embedding_of(text, dims)
            if encoding == "base64":
                vector = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": vector})
        if self.embeddings_reversed:
            data.reverse()
        self.embedding_inputs.append(inputs)
        usage = {"prompt_tokens": sum(tokens), "total_tokens": sum(tokens)}
        return json_reply(200, {"object": "list", "data": data, "model": model, "usage": usage})

    @staticmethod
    def embedding_of(text: str, dims: int) -> list[float]:
        """The vector this fake answers for `text` (a hash of it), so a test can say what it expects."""
        seed = hashlib.sha256(text.encode()).digest()
        return [(seed[i % len(seed)] - 127.5) / 127.5 for i in range(dims)]

    # --- validation: the rules the real API enforces on replayed input ---

    def validate(self, request: RecordedRequest, path: str = "/v1/responses") -> None:
        if request.path != path:
            raise Rejected(ErrorReply(404, f"Invalid URL (POST {request.path})"))
        body = request.body or {}
        if not request.headers.get("authorization", "").startswith("Bearer "):
            raise Rejected(ErrorReply(401, "You didn't provide an API key."))
        model = str(body.get("model"))
        if "reasoning.encrypted_content" in (body.get("include") or []) and not reasoning_model(model):
            raise Rejected(ErrorReply(400, "Encrypted content is not supported with this model."))
        summary = (body.get("reasoning") or {}).get("summary")
        if summary is not None and self.presented_key(request) in self.unverified_keys:
            raise Rejected(ErrorReply(400, UNVERIFIED_SUMMARY, param="reasoning.summary", code="unsupported_value"))
        effort = (body.get("reasoning") or {}).get("effort")
        if effort is not None:
            if not reasoning_model(model):
                raise Rejected(ErrorReply(400, UNSUPPORTED_PARAMETER.format(name="reasoning.effort")))
            allowed = effort_values(model)
            if effort not in allowed:
                listed = ", ".join(f"'{v}'" for v in allowed[:-1]) + f", and '{allowed[-1]}'"
                raise Rejected(ErrorReply(400, UNSUPPORTED_EFFORT.format(value=effort, allowed=listed)))
        if "temperature" in body and reasoning_model(model):
            raise Rejected(ErrorReply(400, UNSUPPORTED_PARAMETER.format(name="temperature")))
        items = body.get("input") or []
        if isinstance(items, str):
            return
        call_ids = [i.get("call_id") for i in items if i.get("type") == "function_call"]
        output_ids = [i.get("call_id") for i in items if i.get("type") == "function_call_output"]
        seen_calls: set[str] = set()
        for position, item in enumerate(items):
            kind = item.get("type")
            if kind == "reasoning":
                if not item.get("encrypted_content") and body.get("store") is False:
                    # Without encrypted content the API looks the id up in stored items, and store=false kept none.
                    raise Rejected(
                        ErrorReply(404, NOT_PERSISTED.format(id=item.get("id")), kind="invalid_request_error")
                    )
                issued = self.issued_reasoning.get(item.get("id"))
                # Encrypted reasoning is bound to the model and the organisation (key) that issued it: replayed to
                # another model or with another key it cannot be decrypted (reported on agents' trackers after a
                # model switch: "The encrypted content for item rs_... could not be verified").
                if (
                    issued is None
                    or issued["encrypted_content"] != item.get("encrypted_content")
                    or issued.get("model", model) != model
                    or issued.get("key", self.presented_key(request)) != self.presented_key(request)
                ):
                    raise Rejected(
                        ErrorReply(400, f"The encrypted content for item {item.get('id')} could not be verified.")
                    )
                following = issued["following"]
                nxt = items[position + 1] if position + 1 < len(items) else None
                if following and (nxt is None or nxt.get("id") != following):
                    raise Rejected(
                        ErrorReply(
                            400,
                            f"Item '{item.get('id')}' of type 'reasoning' was provided without its required "
                            "following item.",
                        )
                    )
            elif kind in ("message", None) and item.get("role") == "user":  # an "easy input message" has no type
                self._check_user_content(position, item.get("content"), model)
            elif kind == "function_call":
                if not isinstance(item.get("arguments"), str):
                    raise Rejected(
                        ErrorReply(400, f"Invalid type for 'input[{position}].arguments': expected a string.")
                    )
                seen_calls.add(item.get("call_id"))
            elif kind == "function_call_output":
                if item.get("call_id") not in seen_calls:
                    raise Rejected(
                        ErrorReply(
                            400, f"No tool call found for function call output with call_id {item.get('call_id')}."
                        )
                    )
        for call_id in call_ids:
            if call_id not in output_ids:
                raise Rejected(ErrorReply(400, f"No tool output found for function call {call_id}."))

    def _check_user_content(self, position: int, content, model: str) -> None:  # noqa: C901 - one rule per branch
        """The input content parts of the images and file inputs guides: `input_image` with an http(s) URL or a
        base64 data URL of a supported image type and a `detail`; `input_file` with `file_data` (a base64 data URL)
        and its `filename`, of a listed file type. Models without vision take neither images nor PDFs."""
        if isinstance(content, str):
            return
        payload = 0
        for index, part in enumerate(content or []):
            where = f"input[{position}].content[{index}]"
            kind = part.get("type")
            if kind not in CONTENT_TYPES:
                allowed = "', '".join(CONTENT_TYPES)
                raise Rejected(
                    ErrorReply(
                        400, f"Invalid value: '{kind}'. Supported values are: '{allowed}'.", param=f"{where}.type"
                    )
                )
            if kind == "input_image":
                if model.startswith(TEXT_ONLY_MODELS):
                    raise Rejected(
                        ErrorReply(400, "Invalid content type. image_url is only supported by certain models.")
                    )
                if part.get("detail") not in IMAGE_DETAILS:
                    raise Rejected(
                        ErrorReply(400, f"Missing required parameter: '{where}.detail'.", param=f"{where}.detail")
                    )
                url = part.get("image_url")
                if isinstance(url, str) and url.startswith(("http://", "https://")):
                    continue
                try:
                    media_type, data = data_url(url)
                except BadMedia:
                    raise Rejected(
                        ErrorReply(
                            400,
                            f"Invalid '{where}.image_url'. Expected a valid URL, but got a value with an invalid "
                            "format.",
                            param=f"{where}.image_url",
                        )
                    ) from None
                if media_type not in IMAGE_TYPES or sniff(data) not in IMAGE_TYPES:
                    raise Rejected(
                        ErrorReply(
                            400,
                            f"Invalid '{where}.image_url'. Expected a base64-encoded data URL with an image MIME type "
                            "(e.g. "
                            f"'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got unsupported MIME type "
                            f"'{media_type}'.",
                            param=f"{where}.image_url",
                        )
                    )
                payload += len(data)
            elif kind == "input_file":
                if not any(part.get(key) for key in ("file_data", "file_id", "file_url")):
                    raise Rejected(ErrorReply(400, f"Missing required parameter: '{where}.file_data'.", param=where))
                if part.get("file_data") is not None:
                    filename = part.get("filename")
                    if not isinstance(filename, str) or not filename:
                        raise Rejected(
                            ErrorReply(
                                400, f"Missing required parameter: '{where}.filename'.", param=f"{where}.filename"
                            )
                        )
                    if not filename.lower().endswith(FILE_EXTENSIONS):
                        ext = "." + filename.rsplit(".", 1)[-1] if "." in filename else filename
                        raise Rejected(
                            ErrorReply(
                                400,
                                "Invalid input: Expected context stuffing file type to be a supported format: "
                                f"{', '.join(FILE_EXTENSIONS)}, but got {ext}.",
                                param=where,
                            )
                        )
                    try:
                        _media_type, data = data_url(part["file_data"])
                    except BadMedia:
                        raise Rejected(
                            ErrorReply(
                                400,
                                f"Invalid '{where}.file_data'. Expected a base64-encoded data URL.",
                                param=f"{where}.file_data",
                            )
                        ) from None
                    if filename.lower().endswith(".pdf") and model.startswith(TEXT_ONLY_MODELS):
                        raise Rejected(
                            ErrorReply(400, "PDF file inputs are only supported by models with vision capabilities.")
                        )
                    payload += len(data)
        if payload > MAX_PAYLOAD:
            raise Rejected(ErrorReply(413, "Request too large: the files of one request may total at most 50 MB."))

    def render_error(self, error: ErrorReply) -> RawReply:
        body = {
            "error": {
                "message": error.message,
                "type": error.kind or ERROR_TYPES.get(error.status, "server_error"),
                "param": error.param or ("input" if error.status == 400 else None),
                "code": error.code or ("context_length_exceeded" if "context window" in error.message else None),
            }
        }
        return json_reply(error.status, body, error.headers)

    # --- rendering a scripted turn as Responses SSE ---

    def render(self, request: RecordedRequest, turn: Turn) -> SSE:
        body = request.body or {}
        response_id = self.next_id("resp")
        response = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "model": body.get("model", "gpt-test"),
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools", []),
            "store": body.get("store", True),
            "usage": None,
        }
        frames: list[bytes] = []
        labels: list[str] = []
        seq = 0

        def emit(data: dict, label: str = "") -> None:
            nonlocal seq
            data["sequence_number"] = seq
            seq += 1
            frames.append(sse_frame(data, data["type"]))
            labels.append(label)

        emit({"type": "response.created", "response": dict(response)})
        emit({"type": "response.in_progress", "response": dict(response)})
        output: list[dict] = []
        for index, part in enumerate(turn.parts):
            if isinstance(part, Think):
                item_id = self.next_id("rs")
                encrypted = (
                    part.signature
                    or "gAAAA"
                    + base64.b64encode(hashlib.sha256(f"{item_id}:{part.text}".encode()).digest() * 3).decode()
                )
                item = {"id": item_id, "type": "reasoning", "summary": [], "encrypted_content": None}
                emit({"type": "response.output_item.added", "output_index": index, "item": dict(item)})
                emit(
                    {
                        "type": "response.reasoning_summary_part.added",
                        "item_id": item_id,
                        "output_index": index,
                        "summary_index": 0,
                        "part": {"type": "summary_text", "text": ""},
                    }
                )
                for piece in _split(part.text):
                    emit(
                        {
                            "type": "response.reasoning_summary_text.delta",
                            "item_id": item_id,
                            "output_index": index,
                            "summary_index": 0,
                            "delta": piece,
                        },
                        "thinking_delta",
                    )
                emit(
                    {
                        "type": "response.reasoning_summary_text.done",
                        "item_id": item_id,
                        "output_index": index,
                        "summary_index": 0,
                        "text": part.text,
                    }
                )
                item = {
                    "id": item_id,
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": part.text}],
                }
                if "reasoning.encrypted_content" in (body.get("include") or []):
                    item["encrypted_content"] = encrypted  # only sent when the request asked for it
                emit({"type": "response.output_item.done", "output_index": index, "item": item})
                output.append(item)
            elif isinstance(part, Text):
                item_id = self.next_id("msg")
                start = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
                if part.phase:
                    start["phase"] = part.phase
                emit({"type": "response.output_item.added", "output_index": index, "item": start})
                emit(
                    {
                        "type": "response.content_part.added",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": []},
                    }
                )
                for piece in _split(part.text):
                    emit(
                        {
                            "type": "response.output_text.delta",
                            "item_id": item_id,
                            "output_index": index,
                            "content_index": 0,
                            "delta": piece,
                            "logprobs": [],
                        },
                        "text_delta",
                    )
                content = {"type": "output_text", "text": part.text, "annotations": [], "logprobs": []}
                emit(
                    {
                        "type": "response.output_text.done",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "text": part.text,
                        "logprobs": [],
                    }
                )
                emit(
                    {
                        "type": "response.content_part.done",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "part": content,
                    }
                )
                item = {**start, "status": "completed", "content": [content]}
                emit({"type": "response.output_item.done", "output_index": index, "item": item})
                output.append(item)
            elif isinstance(part, Call):
                item_id = self.next_id("fc")
                call_id = part.id or self.next_id("call")
                start = {
                    "id": item_id,
                    "type": "function_call",
                    "status": "in_progress",
                    "arguments": "",
                    "call_id": call_id,
                    "name": part.name,
                    **({"namespace": part.namespace} if part.namespace else {}),
                }
                emit({"type": "response.output_item.added", "output_index": index, "item": start})
                for piece in _split(part.arguments) if part.arguments else [""]:
                    emit(
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": item_id,
                            "output_index": index,
                            "delta": piece,
                        },
                        "tool_call_delta",
                    )
                emit(
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item_id,
                        "output_index": index,
                        "arguments": part.arguments,
                    }
                )
                item = {**start, "status": "completed", "arguments": part.arguments}
                emit({"type": "response.output_item.done", "output_index": index, "item": item})
                output.append(item)
                self.issued_calls.add(call_id)
            else:
                raise AssertionError(f"openai fake cannot render {part!r}")
        # A reasoning item must be replayed with the item it produced right after it.
        for position, item in enumerate(output):
            if item["type"] == "reasoning":
                following = output[position + 1]["id"] if position + 1 < len(output) else None
                if following is None and turn.stop == "max_tokens":
                    following = CUT_OFF  # the limit cut the item this reasoning was producing
                self.issued_reasoning[item["id"]] = {
                    "encrypted_content": item.get("encrypted_content"),
                    "following": following,
                    "model": body.get("model"),
                    "key": self.presented_key(request),
                }
        if turn.stop == "max_tokens" and output and output[-1]["type"] == "function_call":
            try:
                json.loads(output[-1]["arguments"])
            except ValueError:
                output[-1] = {**output[-1], "status": "incomplete"}  # the limit cut the call off
        final = {
            **response,
            "status": "incomplete" if turn.stop == "max_tokens" else "completed",
            "output": output,
            "usage": {
                "input_tokens": turn.input_tokens,
                "input_tokens_details": {
                    "cached_tokens": turn.cached_tokens,
                    # Prompt-cache writes, which newer models report and price above input.
                    "cache_write_tokens": turn.cache_creation_tokens,
                },
                "output_tokens": turn.output_tokens,
                "output_tokens_details": {"reasoning_tokens": turn.reasoning_tokens},
                "total_tokens": turn.input_tokens + turn.output_tokens,
            },
        }
        if turn.stop == "max_tokens":
            final["incomplete_details"] = {"reason": "max_output_tokens"}
            emit({"type": "response.incomplete", "response": final}, "terminal")
        else:
            emit({"type": "response.completed", "response": final}, "terminal")
        self.outputs.append(output)
        return stream_of(frames, labels, turn)
