"""Gemini adapter (provider "gemini") through google-genai `generate_content_stream`.

Thought signatures ride on individual parts (a thought part, a text part or a functionCall part) and must go back
on the very same part. Stored form:
- blocks: thought parts -> thinking {signature: its base64 or null, provider: "gemini"}; text parts -> text (text
  streamed over several parts is merged into one block, closed by the part that carries a signature);
  functionCall parts -> tool_call (Gemini sends arguments as an object, so arguments_raw is its JSON text).
- provider_state["gemini"] = {"response_id", "signatures": [{"index", "type", "id"?, "signature"}] for signatures
  on text and tool_call blocks, "synthetic_call_ids": [ids we made up because the API sent none]}.
Automatic function calling and automatic continuation are off: the runtime runs tools, one request per step.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from typing import Any

from google.genai import errors as genai_errors
from google.genai import types

from .. import config
from ..attachments import FilePlan, FileRefused, human_size
from ..billing import calls_cost
from ..catalogue import capabilities
from ..errors import (
    ProviderError,
    TruncatedStreamError,
)
from ..types import ChatRequest, ChatResult, Usage
from ..wire import text_block, tool_call_block
from .clients import TRANSPORT_ERRORS, connect, key_fingerprint, map_error
from .common import (
    Stream,
    data_url_parts,
    estimated_usage,
    image_placeholder,
    object_arguments,
    own_thinking,
    system_text,
    without_turns,
)

PROVIDER = "gemini"
# Documented escape hatch for function calls the model did not sign itself (e.g. made by another provider): it
# tells the API not to validate that part, instead of refusing the whole request.
# The API compares the literal text; the SDK sends a signature's bytes URL-safe base64 encoded, so these are the
# bytes whose encoding is exactly that text (bytes of the text itself would go out as "c2tpcF90aG91...").
SKIP_SIGNATURE = base64.urlsafe_b64decode("skip_thought_signature_validator")
MAX_CONTINUATIONS = 8  # a CONTINUATION finish is followed by at most this many more requests
THINKING_LEVELS = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH"}


def _b64(raw: bytes | None) -> str | None:
    return base64.b64encode(raw).decode() if raw else None


def _unb64(value: str) -> bytes:
    padded = value + "=" * (-len(value) % 4)
    return base64.b64decode(padded.replace("-", "+").replace("_", "/"))


# --- request ---------------------------------------------------------------------------------------------------


def _synthetic_ids(messages: list[dict]) -> set[str]:
    ids: set[str] = set()
    for message in messages:
        state = (message.get("provider_state") or {}).get(PROVIDER) or {}
        ids.update(state.get("synthetic_call_ids") or [])
    return ids


def _model_parts(message: dict, synthetic: set[str], model: str) -> list[types.Part]:
    state = (message.get("provider_state") or {}).get(PROVIDER) or {}
    # A signature is valid only for the model that made it: after a model switch the old model's signatures are
    # left out (thoughts dropped, calls of the turn in progress get the skip value in _sign_current_turn).
    same_model = state.get("model") in (None, model)
    signatures = {
        int(s["index"]): s
        for s in (state.get("signatures") or [] if same_model else [])
        if isinstance(s, dict) and "index" in s
    }
    parts: list[types.Part] = []
    for index, block in enumerate(message.get("blocks", [])):
        kind = block.get("type")
        stored = signatures.get(index)
        signature = None
        if stored and stored.get("type") == kind and (kind != "tool_call" or stored.get("id") == block.get("id")):
            signature = _unb64(stored["signature"])
        if kind == "thinking":
            # Only signed Gemini thoughts are worth sending back; summaries alone carry nothing for the model.
            if own_thinking(block, PROVIDER) and block.get("signature") and same_model:
                parts.append(types.Part(text=block["text"], thought=True, thought_signature=_unb64(block["signature"])))
        elif kind == "text":
            if block["text"] or signature:
                parts.append(types.Part(text=block["text"], thought_signature=signature))
        elif kind == "tool_call":
            arguments, note = object_arguments(block)
            if note:
                parts.append(types.Part(text=note))
            call = types.FunctionCall(
                name=block["name"], args=arguments, id=None if block["id"] in synthetic else block["id"]
            )
            parts.append(types.Part(function_call=call, thought_signature=signature))
        elif kind == "image":
            parts.append(types.Part(text=image_placeholder(block, PROVIDER)))
    return parts


def _file_part(block: dict, files: FilePlan) -> types.Part:
    """An attached file as Gemini documents it: `inline_data` with the file's MIME type (images, PDF), text files as
    `text/plain` (the document types Gemini lists; JSON and Markdown are not among them); text otherwise."""
    prepared = files[block]
    if prepared.form != "native":
        return types.Part(text=prepared.as_text())
    if prepared.uri:
        return types.Part(file_data=types.FileData(file_uri=prepared.uri, mime_type=_mime(prepared)))
    mime = prepared.media_type
    if prepared.kind == "text" and mime != "text/csv":
        mime = "text/plain"
    return types.Part(inline_data=types.Blob(mime_type=mime, data=prepared.data))


def _mime(prepared) -> str:
    return "text/plain" if prepared.kind == "text" and prepared.media_type != "text/csv" else prepared.media_type


# Files uploaded to the Files API, by (key fingerprint, sha256): their URI and until when to use it. Google keeps an
# upload 48 hours; it is used for 47, then uploaded again.
_UPLOADS: dict[tuple[str, str], tuple[str, float]] = {}
_UPLOADS_LOCK = threading.Lock()
UPLOAD_KEEP_S = 47 * 3600


def upload_over_inline_limit(files: FilePlan, client, request: ChatRequest) -> None:
    """Gemini takes inline data up to a limit per request (GEMINI_INLINE_LIMIT_BYTES, 100 MB as documented): the
    largest native files go through the Files API until the rest fits, each uploaded once per key while Google keeps
    it. Never called inside a lock of ours: it makes network calls."""
    limit = int(config.setting("GEMINI_INLINE_LIMIT_BYTES"))
    native = [p for p in files.files() if p.form == "native"]
    total = sum(len(p.data) for p in native)
    if total <= limit:
        return
    fingerprint = key_fingerprint(request, PROVIDER)
    for prepared in sorted(native, key=lambda p: len(p.data), reverse=True):
        if total <= limit:
            return
        cache_key = (fingerprint, str(prepared.block.get("sha256")))
        with _UPLOADS_LOCK:
            cached = _UPLOADS.get(cache_key)
        if cached and cached[1] > time.time():
            prepared.uri = cached[0]
        else:
            try:
                uploaded = client.files.upload(
                    file=io.BytesIO(prepared.data),
                    config=types.UploadFileConfig(mime_type=_mime(prepared), display_name=prepared.name),
                )
            except Exception as exc:
                raise map_error(exc, provider=PROVIDER, api_key=request.api_key) from exc
            if not uploaded.uri:
                raise FileRefused(
                    f"{prepared.name} was not sent: Gemini's Files API gave no URI for it "
                    f"({human_size(len(prepared.data))}).",
                    provider=PROVIDER,
                )
            prepared.uri = uploaded.uri
            with _UPLOADS_LOCK:
                _UPLOADS[cache_key] = (uploaded.uri, time.time() + UPLOAD_KEEP_S)
        total -= len(prepared.data)


def _user_parts(message: dict, files: FilePlan) -> list[types.Part]:
    parts: list[types.Part] = []
    for block in message.get("blocks", []):
        if block.get("type") == "text" and block["text"]:
            parts.append(types.Part(text=block["text"]))
        elif block.get("type") == "file":
            parts.append(_file_part(block, files))
        elif block.get("type") == "image":
            parsed = data_url_parts(block.get("ref", ""))
            if parsed:
                parts.append(types.Part(inline_data=types.Blob(mime_type=parsed[0], data=base64.b64decode(parsed[1]))))
            else:
                parts.append(types.Part(text=image_placeholder(block, PROVIDER)))
    return parts


def blocked(message: dict) -> bool:
    return "blocked" in (message.get("meta") or {})


def build_contents(messages: list[dict], model: str = "", files: FilePlan | None = None) -> list[types.Content]:
    if files is None:
        files = FilePlan(PROVIDER, model, messages)
    messages = without_turns(messages, blocked)  # a blocked prompt sent again is blocked again
    synthetic = _synthetic_ids(messages)
    contents: list[types.Content] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            parts = _user_parts(message, files)
            if parts:
                contents.append(types.Content(role="user", parts=parts))
        elif role == "assistant":
            parts = _model_parts(message, synthetic, model)
            if parts:
                contents.append(types.Content(role="model", parts=parts))
        elif role == "tool":
            responses = []
            for block in message.get("blocks", []):
                if block.get("type") != "tool_result":
                    continue
                key = "error" if block.get("is_error") else "output"
                responses.append(
                    types.Part(
                        function_response=types.FunctionResponse(
                            name=block["name"],
                            id=None if block["tool_call_id"] in synthetic else block["tool_call_id"],
                            response={key: block["content"]},
                        )
                    )
                )
            # All results of one step go back in one content, as many responses as there were calls.
            if contents and contents[-1].role == "user" and all(p.function_response for p in contents[-1].parts or []):
                contents[-1].parts.extend(responses)
            else:
                contents.append(types.Content(role="user", parts=responses))
    _sign_current_turn(contents)
    return contents


def _sign_current_turn(contents: list[types.Content]) -> None:
    """Gemini refuses a current-turn step whose first functionCall part is unsigned. A call we hold no signature
    for (made by another provider, or its signature was lost) gets the documented skip value instead."""
    start = 0
    for index, content in enumerate(contents):
        if content.role == "user" and any(not p.function_response for p in content.parts or []):
            start = index + 1
    for content in contents[start:]:
        if content.role != "model":
            continue
        calls = [p for p in content.parts or [] if p.function_call]
        if calls and not calls[0].thought_signature:
            calls[0].thought_signature = SKIP_SIGNATURE


def thinking_config(request: ChatRequest) -> types.ThinkingConfig | None:
    """The thinking knob per model family: a token budget for 2.5 (which refuses thinking_level), a level for 3.x
    (where the budget is legacy). "off" is budget 0 only where the model can stop thinking (2.5 Pro refuses 0 and
    gets its minimum), the lowest level the family has for 3.x."""
    level = request.settings.thinking
    caps = capabilities(PROVIDER, request.model)
    if not level or caps.thinking == "none":
        return None
    if caps.thinking == "budget":
        if level == "off":
            return types.ThinkingConfig(thinking_budget=int(caps.thinking_off or 0))
        budget = caps.thinking_budgets.get(level) or caps.thinking_budgets.get("medium") or -1
        return types.ThinkingConfig(include_thoughts=True, thinking_budget=int(budget))
    if level == "off":
        return types.ThinkingConfig(thinking_level=str(caps.thinking_off or "LOW"))
    return types.ThinkingConfig(include_thoughts=True, thinking_level=THINKING_LEVELS.get(level, "MEDIUM"))


def build_config(request: ChatRequest) -> types.GenerateContentConfig:
    settings = request.settings
    kwargs: dict[str, Any] = {
        "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        "automatic_continuation": False,
    }
    system = system_text(request.messages)
    if system:
        kwargs["system_instruction"] = system
    if request.tools:
        kwargs["tools"] = [
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name=tool.name, description=tool.description, parameters_json_schema=tool.parameters
                    )
                    for tool in request.tools
                ]
            )
        ]
    caps = capabilities(PROVIDER, request.model)
    if settings.temperature is not None and (settings.temperature_confirmed or not caps.temperature_confirm):
        kwargs["temperature"] = settings.temperature
    if settings.max_output_tokens:
        kwargs["max_output_tokens"] = settings.max_output_tokens
    thinking = thinking_config(request)
    if thinking is not None:
        kwargs["thinking_config"] = thinking
    return types.GenerateContentConfig(**kwargs)


# --- response --------------------------------------------------------------------------------------------------


class _Assembler:
    def __init__(self, stream: Stream):
        self.stream = stream
        self.blocks: list[dict] = []
        self.signatures: list[dict] = []
        self.synthetic: list[str] = []
        self.open_kind: str | None = None  # "thinking" or "text" while such a block still grows
        self.response_id: str | None = None

    def _close_thinking(self) -> None:
        if self.open_kind == "thinking":
            self.stream.emit({"type": "thinking_end"})
        self.open_kind = None if self.open_kind == "thinking" else self.open_kind

    def add(self, part: types.Part) -> None:
        signature = _b64(part.thought_signature)
        if part.thought and part.text is not None:
            if self.open_kind != "thinking":
                self.open_kind = "thinking"
                self.stream.emit({"type": "thinking_start"})
                self.blocks.append({"type": "thinking", "text": "", "signature": None, "provider": PROVIDER})
            self.blocks[-1]["text"] += part.text
            if signature:
                self.blocks[-1]["signature"] = signature
                self._close_thinking()
        elif part.function_call is not None:
            self._close_thinking()
            self.open_kind = None
            call = part.function_call
            call_id = call.id
            if not call_id:
                call_id = f"gemini_call_{self.response_id or 'r'}_{len(self.blocks)}"
                self.synthetic.append(call_id)
            raw = json.dumps(call.args or {}, ensure_ascii=False)
            self.stream.emit({"type": "tool_call_start", "id": call_id, "name": call.name})
            self.stream.emit({"type": "tool_call_delta", "id": call_id, "delta": raw})
            self.blocks.append(tool_call_block(id=call_id, name=call.name or "", arguments_raw=raw))
            if signature:
                self.signatures.append(
                    {"index": len(self.blocks) - 1, "type": "tool_call", "id": call_id, "signature": signature}
                )
        elif part.text is not None:
            self._close_thinking()
            if self.open_kind != "text":
                self.open_kind = "text"
                self.blocks.append(text_block(""))
            self.blocks[-1]["text"] += part.text
            if part.text:
                self.stream.emit({"type": "text_delta", "text": part.text})
            if signature:
                self.signatures.append({"index": len(self.blocks) - 1, "type": "text", "signature": signature})
                self.open_kind = None  # the signature belongs to exactly this part: the next text is a new block

    def stopped_blocks(self) -> list[dict]:
        blocks = [dict(b) for b in self.blocks]
        if self.open_kind == "text" and blocks and blocks[-1]["type"] == "text":
            blocks[-1]["stopped"] = True
        # A thought without its signature cannot be replayed: not kept from an interrupted stream.
        return [b for b in blocks if not (b["type"] == "thinking" and not b.get("signature"))]


def chat(request: ChatRequest, stream: Stream) -> ChatResult:
    client, api_key = connect(request, PROVIDER)
    files = FilePlan(PROVIDER, request.model, request.messages)
    upload_over_inline_limit(files, client, request)
    contents = build_contents(request.messages, request.model, files)
    gen_config = build_config(request)
    assembler = _Assembler(stream)
    usage = Usage()
    finish: str | None = None
    stopped = False
    received_any = False
    chunks = None
    continuation: bytes | None = None
    hops = 0
    block: dict | None = None  # promptFeedback of a blocked prompt: no candidates will come
    hop_usages: list[dict] = []  # each continuation hop is a call of its own, priced on its own
    try:
        while True:
            # A CONTINUATION finish means the answer is not done: the same request goes again with the token, and
            # the hops are assembled into one reply. Each hop is a request of its own, so its usage is added.
            hop_config = (
                gen_config
                if continuation is None
                else gen_config.model_copy(update={"continuation_token": continuation})
            )
            continuation, finish, hop_usage = None, None, Usage()
            chunks = client.models.generate_content_stream(model=request.model, contents=contents, config=hop_config)
            for chunk in stream.pump(chunks):
                received_any = True
                assembler.response_id = assembler.response_id or chunk.response_id
                if chunk.usage_metadata is not None:
                    # Each chunk's usageMetadata is the running total of this hop: the latest replaces, never adds.
                    meta = chunk.usage_metadata
                    hop_usage.input_tokens = int(meta.prompt_token_count or 0)
                    hop_usage.cached_tokens = int(meta.cached_content_token_count or 0)
                    hop_usage.reasoning_tokens = int(meta.thoughts_token_count or 0)
                    hop_usage.output_tokens = int(meta.candidates_token_count or 0) + hop_usage.reasoning_tokens
                feedback = getattr(chunk, "prompt_feedback", None)
                if feedback is not None and feedback.block_reason is not None:
                    block = {
                        "reason": str(getattr(feedback.block_reason, "value", feedback.block_reason)),
                        "message": getattr(feedback, "block_reason_message", None),
                    }
                candidate = (chunk.candidates or [None])[0]
                if candidate is not None:
                    if candidate.content is not None:
                        for part in candidate.content.parts or []:
                            assembler.add(part)
                    if candidate.finish_reason is not None:
                        finish = str(getattr(candidate.finish_reason, "value", candidate.finish_reason))
                    if getattr(candidate, "continuation_token", None):
                        continuation = candidate.continuation_token
                if finish is None and stream.stopped():
                    stopped = True
                    break
            hop_usages.append(hop_usage.to_dict())
            usage.input_tokens += hop_usage.input_tokens
            usage.cached_tokens += hop_usage.cached_tokens
            usage.reasoning_tokens += hop_usage.reasoning_tokens
            usage.output_tokens += hop_usage.output_tokens
            hops += 1
            if finish != "CONTINUATION" or stopped or stream.stop_requested or block is not None:
                break
            if continuation is None or hops > MAX_CONTINUATIONS:
                break  # no token to continue with: kept as an answer cut short (stop_reason max_tokens)
    except ProviderError:
        raise
    except genai_errors.APIError as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    except TRANSPORT_ERRORS as exc:
        if received_any:
            raise TruncatedStreamError(
                f"{PROVIDER}: the stream broke before its finishReason", provider=PROVIDER
            ) from exc
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    finally:
        # After Stop the abandoned reader thread still owns the generator; it ends with the connection.
        close = getattr(chunks, "close", None)
        if close is not None and not stream.stop_requested:
            try:
                close()
            except ValueError:  # still running on the reader thread
                pass

    stopped = stopped or stream.stop_requested
    if block is not None and not stopped:
        return _blocked_result(request, block, usage, assembler.response_id)
    if finish is None and not stopped:
        raise TruncatedStreamError(f"{PROVIDER}: the stream ended without a finishReason", provider=PROVIDER)
    if stopped:
        blocks = assembler.stopped_blocks()
        stop_reason = "stopped"
        usage = estimated_usage(request, blocks)
    else:
        assembler._close_thinking()
        blocks = assembler.blocks
        if finish in ("MAX_TOKENS", "CONTINUATION"):
            stop_reason = "max_tokens"
        elif any(b["type"] == "tool_call" for b in blocks):
            stop_reason = "tool_use"
        elif finish == "STOP":
            stop_reason = "end_turn"
        elif finish in ("SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"):
            stop_reason = "refusal"
        else:
            stop_reason = "other"
    if not stopped and len(hop_usages) > 1:
        # The summed tokens of the hops could cross a long-context price tier none of the calls reached.
        cost, source = calls_cost(provider=PROVIDER, model=request.model, usages=hop_usages)
        if cost is not None:
            usage.cost_usd, usage.cost_source = float(cost), source
    signatures = [s for s in assembler.signatures if s["index"] < len(assembler.blocks)]
    if stopped:
        # Indices refer to the full list; re-point them at the kept blocks.
        remap = {}
        position = 0
        for index, block in enumerate(assembler.blocks):
            if not (block["type"] == "thinking" and not block.get("signature")):
                remap[index] = position
                position += 1
        signatures = [{**s, "index": remap[s["index"]]} for s in signatures if s["index"] in remap]
    state = {"response_id": assembler.response_id, "model": request.model, "signatures": signatures}
    if assembler.synthetic:
        state["synthetic_call_ids"] = assembler.synthetic
    message = {
        "role": "assistant",
        "blocks": blocks,
        "provider_state": {PROVIDER: state},
        "usage": usage.to_dict(),
    }
    return ChatResult(
        message=message,
        usage=usage,
        stop_reason=stop_reason,
        provider_ids={"response_id": assembler.response_id, "finish_reason": finish},
    )


def _blocked_result(request: ChatRequest, block: dict, usage: Usage, response_id: str | None) -> ChatResult:
    """A blocked prompt (`promptFeedback.blockReason`, no candidates): a complete answer from Gemini, not a broken
    stream, so nothing suggests a retry. The owner reads the reason in plain words; the prompt's tokens are billed
    (usageMetadata counts them); the turn is left out of later requests (`blocked`)."""
    reason = block["reason"]
    words = f"Gemini blocked this prompt ({reason.replace('_', ' ').lower()}) and did not answer it."
    if block.get("message"):
        words += f" {block['message']}"
    words += " Sending it again will be blocked again; rephrase it to go on."
    usage = Usage(input_tokens=usage.input_tokens, cached_tokens=usage.cached_tokens)
    message = {
        "role": "assistant",
        "blocks": [text_block(words)],
        "provider_state": {PROVIDER: {"response_id": response_id, "model": request.model, "signatures": []}},
        "usage": usage.to_dict(),
        "meta": {"blocked": block, "notes": [words]},
    }
    return ChatResult(
        message=message,
        usage=usage,
        stop_reason="refusal",
        provider_ids={"response_id": response_id, "block_reason": reason},
    )


def count_input_tokens(request: ChatRequest) -> int:
    client, api_key = connect(request, PROVIDER)
    files = FilePlan(PROVIDER, request.model, request.messages)
    upload_over_inline_limit(files, client, request)
    try:
        result = client.models.count_tokens(
            model=request.model, contents=build_contents(request.messages, request.model, files)
        )
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    return int(result.total_tokens or 0)


def check_credentials(request: ChatRequest) -> None:
    """One cheap call that proves the key works: the model list (free, no tokens)."""
    client, api_key = connect(request, PROVIDER)
    try:
        next(iter(client.models.list(config={"page_size": 1})), None)
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
