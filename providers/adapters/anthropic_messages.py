"""Anthropic Messages adapter (provider "anthropic").

Thinking and redacted_thinking blocks carry their own signature/data in the wire, so replay needs no extra state:
they go back unmodified and in their original position. Tool results (one wire message each) are grouped into the
single user message Anthropic requires right after the assistant message that made the calls.
"""

from __future__ import annotations

import re
from typing import Any

import anthropic

from .. import config
from ..attachments import FilePlan
from ..catalogue import capabilities
from ..errors import (
    ProviderError,
    TruncatedStreamError,
)
from ..types import ChatRequest, ChatResult, Usage
from ..wire import text_block, tool_call_block
from .clients import connect, map_error
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

PROVIDER = "anthropic"
CUT_CALL_NOTE = (
    "[The output token limit cut off a call to `{name}` before its arguments were complete: that call was not made.]"
)
THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


# --- request ---------------------------------------------------------------------------------------------------


def _tool_id(call_id: str) -> str:
    """Anthropic accepts tool ids matching ^[a-zA-Z0-9_-]+$; ids made by other providers may not. The same
    mapping is applied to the call and its result, so pairs stay paired."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", call_id) or "tool_call"


def _image(block: dict) -> dict:
    ref = block.get("ref", "")
    parsed = data_url_parts(ref)
    if parsed:
        return {"type": "image", "source": {"type": "base64", "media_type": parsed[0], "data": parsed[1]}}
    if ref.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": ref}}
    return {"type": "text", "text": image_placeholder(block, PROVIDER)}


def _assistant_content(message: dict) -> list[dict]:
    content: list[dict] = []
    for block in message.get("blocks", []):
        kind = block.get("type")
        if kind == "thinking":
            # Replayed only when signed by Anthropic; the signature covers the exact text, so both go back as-is.
            if own_thinking(block, PROVIDER) and block.get("signature"):
                content.append({"type": "thinking", "thinking": block["text"], "signature": block["signature"]})
        elif kind == "redacted_thinking":
            content.append({"type": "redacted_thinking", "data": block["data"]})
        elif kind == "text":
            if block["text"]:  # Anthropic rejects empty text blocks
                content.append({"type": "text", "text": block["text"]})
        elif kind == "tool_call":
            arguments, note = object_arguments(block)
            if note:
                content.append({"type": "text", "text": note})
            content.append({"type": "tool_use", "id": _tool_id(block["id"]), "name": block["name"], "input": arguments})
        elif kind == "image":
            content.append({"type": "text", "text": image_placeholder(block, PROVIDER)})
    cut = (message.get("meta") or {}).get("cut_call")
    if cut:
        content.append({"type": "text", "text": CUT_CALL_NOTE.format(name=cut)})  # so the model knows it did not run
    # Anthropic refuses an assistant message whose final block is thinking ("The final block in an assistant
    # message cannot be `thinking`"); a reply stopped right after its thinking, stored before this rule, ends so.
    while content and content[-1]["type"] in ("thinking", "redacted_thinking"):
        content.pop()
    return content


def _file(block: dict, files: FilePlan) -> dict:
    """An attached file as Anthropic documents it: an `image` block with a base64 source; a `document` block with
    a base64 PDF source or, for a text file, a plain-text source (titled with the file's name); text otherwise."""
    prepared = files[block]
    if prepared.form != "native":
        return {"type": "text", "text": prepared.as_text()}
    if prepared.kind == "image":
        source = {"type": "base64", "media_type": prepared.media_type, "data": prepared.b64()}
        return {"type": "image", "source": source}
    if prepared.kind == "pdf":
        source = {"type": "base64", "media_type": "application/pdf", "data": prepared.b64()}
    else:
        source = {"type": "text", "media_type": "text/plain", "data": prepared.data.decode("utf-8", errors="replace")}
    return {"type": "document", "source": source, "title": prepared.name}


def _user_content(message: dict, files: FilePlan) -> list[dict]:
    content: list[dict] = []
    for block in message.get("blocks", []):
        if block.get("type") == "text" and block["text"]:
            content.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "image":
            content.append(_image(block))
        elif block.get("type") == "file":
            content.append(_file(block, files))
    return content


def build_messages(messages: list[dict], files: FilePlan | None = None) -> list[dict]:
    """The Messages API list for `messages`; `files` what each attached file becomes (built for an unknown model
    when not given)."""
    if files is None:
        files = FilePlan(PROVIDER, "", messages)
    out: list[dict] = []

    def add(role: str, content: list[dict]) -> None:
        if not content:
            return
        # Tool results and a following user message share one user turn; tool_result blocks must come first.
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})

    for message in messages:
        role = message.get("role")
        if role == "user":
            add("user", _user_content(message, files))
        elif role == "assistant":
            add("assistant", _assistant_content(message))
        elif role == "tool":
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": _tool_id(block["tool_call_id"]),
                    "content": block["content"] or "(empty)",
                    "is_error": bool(block.get("is_error")),
                }
                for block in message.get("blocks", [])
                if block.get("type") == "tool_result"
            ]
            add("user", results)
    return out


def _turn_start(messages: list[dict]) -> int:
    """Index of the first message of the assistant turn in progress: the one after the last user message that is
    more than tool results. A tool loop (assistant, tool results, assistant, ...) is one assistant turn."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message["role"] == "user" and any(b.get("type") != "tool_result" for b in message["content"]):
            return index + 1
    return 0


def _turn_started_with_thinking(messages: list[dict]) -> bool | None:
    """Whether the turn in progress began with a thinking block; None when no assistant step of it exists yet.

    Anthropic keeps one thinking configuration per assistant turn: when thinking is on, the first assistant
    message of a tool loop must start with a thinking block, and later steps of the same loop (without
    interleaved thinking) carry none. So the decision is read from the turn's first step, not from the previous
    message."""
    for message in messages[_turn_start(messages) :]:
        if message["role"] == "assistant":
            first = message["content"][0] if message["content"] else {}
            return first.get("type") in ("thinking", "redacted_thinking")
    return None


_UNRECORDED = object()


def _recorded_turn_thinking(messages: list[dict]):
    """The thinking type ("adaptive", "enabled") or None the turn in progress began with, as its first Anthropic
    step recorded it; _UNRECORDED when that step was made elsewhere or before the type was recorded (the blocks
    then tell). Adaptive thinking may skip thinking on a step, so the blocks alone cannot say."""
    start = 0
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            start = index + 1
    for message in messages[start:]:
        if message.get("role") == "assistant":
            state = (message.get("provider_state") or {}).get(PROVIDER) or {}
            return state.get("thinking", _UNRECORDED)
    return _UNRECORDED


def thinking_params(request: ChatRequest, caps, messages: list[dict]) -> tuple[dict, int | None]:
    """The thinking fields for this request, per model family (catalogue `thinking`), and the budget if any."""
    level = request.settings.thinking
    if not level or level == "off" or caps.thinking == "none":
        # "off" is sent as no thinking field: every family accepts that, and `disabled` is refused by the
        # adaptive-only ones.
        return {}, None
    recorded = _recorded_turn_thinking(request.messages)
    if recorded is None:
        return {}, None  # the turn began without thinking: it ends without it
    # Manual thinking needs the turn's first step to start with a thinking block as sent (its block may not go back:
    # another provider's, or stopped); adaptive thinking does not, and may have skipped it on that step.
    if recorded != "adaptive" and _turn_started_with_thinking(messages) is False:
        # The turn began without thinking (another provider or a thinking-off request made its first step):
        # Anthropic refuses thinking now, and the documented way out is to finish the turn without it.
        return {}, None
    if caps.thinking == "budget":
        budget = THINKING_BUDGET.get(level, THINKING_BUDGET["medium"])
        return {"thinking": {"type": "enabled", "budget_tokens": budget}}, budget
    effort = EFFORT.get(level, "medium")
    return {"thinking": {"type": "adaptive"}, "output_config": {"effort": effort}}, None


def _mark_last_cacheable(content: list[dict]) -> None:
    for block in reversed(content):
        if block.get("type") not in ("thinking", "redacted_thinking"):  # thinking blocks cannot carry one
            block["cache_control"] = {"type": "ephemeral"}
            return


def _cache_breakpoints(params: dict) -> None:
    """Prompt caching (Anthropic's guide: at most 4 breakpoints; a lookup walks back only about 20 blocks from
    each). Three: after the system prompt; at the end of what the previous step sent (the message before the
    latest assistant reply), so that prefix is read back exactly however many calls and results the latest step
    added; and on the last block, which writes the rest for the next step."""
    system = params.get("system")
    if isinstance(system, str) and system:
        params["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
    messages = params["messages"]
    if not messages:
        return
    if len(messages) >= 3 and messages[-2]["role"] == "assistant":
        _mark_last_cacheable(messages[-3]["content"])
    _mark_last_cacheable(messages[-1]["content"])


def build_params(request: ChatRequest, *, for_counting: bool = False) -> dict:
    params: dict[str, Any] = {
        "model": request.model,
        "messages": build_messages(
            without_turns(request.messages, refused), FilePlan(PROVIDER, request.model, request.messages)
        ),
    }
    system = system_text(request.messages)
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            for tool in request.tools
        ]
    settings = request.settings
    caps = capabilities(PROVIDER, request.model)
    thinking, budget = thinking_params(request, caps, params["messages"])
    params.update(thinking)
    if not for_counting:
        default = min(int(config.setting("PROVIDER_DEFAULT_MAX_OUTPUT_TOKENS")), caps.max_output_tokens)
        max_tokens = settings.max_output_tokens or default
        if budget and max_tokens <= budget:
            max_tokens = budget + 4096  # the thinking budget must be below max_tokens
        params["max_tokens"] = max_tokens
        # This SDK generation has no temperature parameter. The 4.7+ families refuse it outright ("deprecated
        # for this model"), and every family refuses it while thinking is on.
        if settings.temperature is not None and caps.temperature and not thinking:
            params["extra_body"] = {"temperature": settings.temperature}
        _cache_breakpoints(params)
    return params


def request_max_output(request: ChatRequest) -> int:
    """The output this request will actually allow (what build_params puts in max_tokens)."""
    return int(build_params(request)["max_tokens"])


# --- response --------------------------------------------------------------------------------------------------


def chat(request: ChatRequest, stream: Stream) -> ChatResult:
    client, api_key = connect(request, PROVIDER)
    params = build_params(request)
    blocks: dict[int, dict] = {}  # index -> closed wire block
    open_blocks: dict[int, dict] = {}  # index -> {"kind", "text"/"json"/"signature", ...}
    usage = Usage()
    message_id: str | None = None
    stop_reason: str | None = None
    stop_details: dict | None = None
    finished = False
    stopped = False
    received_any = False
    try:
        events = client.messages.create(stream=True, **params)
        try:
            for event in stream.pump(events, events.close):
                received_any = True
                kind = event.type
                if kind == "message_start":
                    message_id = event.message.id
                    start = event.message.usage
                    cached = start.cache_read_input_tokens or 0
                    written = start.cache_creation_input_tokens or 0
                    usage.input_tokens = start.input_tokens + cached + written
                    usage.cached_tokens = cached
                    usage.cache_creation_tokens = written
                elif kind == "content_block_start":
                    block = event.content_block
                    entry: dict[str, Any] = {"kind": block.type}
                    if block.type == "text":
                        entry["text"] = block.text or ""
                    elif block.type == "thinking":
                        entry.update(text=block.thinking or "", signature=block.signature or "")
                        stream.emit({"type": "thinking_start"})
                    elif block.type == "redacted_thinking":
                        entry["data"] = block.data
                    elif block.type == "tool_use":
                        entry.update(id=block.id, name=block.name, json="")
                        stream.emit({"type": "tool_call_start", "id": block.id, "name": block.name})
                    open_blocks[event.index] = entry
                elif kind == "content_block_delta":
                    entry = open_blocks.get(event.index)
                    delta = event.delta
                    if entry is None:
                        pass
                    elif delta.type == "text_delta":
                        entry["text"] += delta.text
                        stream.emit({"type": "text_delta", "text": delta.text})
                    elif delta.type == "thinking_delta":
                        entry["text"] += delta.thinking
                    elif delta.type == "signature_delta":
                        entry["signature"] = entry.get("signature", "") + delta.signature
                    elif delta.type == "input_json_delta":
                        entry["json"] += delta.partial_json
                        stream.emit({"type": "tool_call_delta", "id": entry["id"], "delta": delta.partial_json})
                elif kind == "content_block_stop":
                    entry = open_blocks.pop(event.index, None)
                    closed = _close_block(entry)
                    if closed is not None:
                        blocks[event.index] = closed
                    if entry and entry["kind"] == "thinking":
                        stream.emit({"type": "thinking_end"})
                elif kind == "message_delta":
                    stop_reason = event.delta.stop_reason
                    details = getattr(event.delta, "stop_details", None)
                    if details is not None:
                        stop_details = {"category": details.category, "explanation": details.explanation}
                    usage.output_tokens = event.usage.output_tokens
                    details = getattr(event.usage, "output_tokens_details", None)
                    usage.reasoning_tokens = int(getattr(details, "thinking_tokens", 0) or 0)
                elif kind == "message_stop":
                    finished = True
                    break
                if stream.stopped():
                    stopped = True
                    break
        finally:
            events.close()
    except ProviderError:
        raise
    except anthropic.APIConnectionError as exc:
        if received_any:
            raise TruncatedStreamError(f"{PROVIDER}: the stream broke before message_stop", provider=PROVIDER) from exc
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc

    stopped = stopped or stream.stop_requested
    cut_call: str | None = None
    if not finished and not stopped:
        raise TruncatedStreamError(f"{PROVIDER}: the stream ended before message_stop", provider=PROVIDER)
    wire_blocks = [blocks[i] for i in sorted(blocks)]
    if stopped:
        # Keep partial text, marked; drop a half-received tool call and a thinking block without its signature.
        wire_blocks = [b for b in wire_blocks if not (b["type"] == "thinking" and not b.get("signature"))]
        for index in sorted(open_blocks):
            entry = open_blocks[index]
            if entry["kind"] == "text" and entry["text"]:
                wire_blocks.append(text_block(entry["text"], stopped=True))
        # Stopped right after a thinking block closed: Anthropic refuses an assistant message that ends with
        # thinking, so thinking that produced nothing is not stored (it was billed; the usage below says so).
        while wire_blocks and wire_blocks[-1]["type"] in ("thinking", "redacted_thinking"):
            wire_blocks.pop()
        result_stop = "stopped"
        # message_start reported the real input; the output so far is estimated.
        estimate = estimated_usage(request, wire_blocks)
        usage = Usage(
            input_tokens=usage.input_tokens or estimate.input_tokens,
            cached_tokens=usage.cached_tokens,
            cache_creation_tokens=usage.cache_creation_tokens,
            output_tokens=estimate.output_tokens,
            estimated=True,
        )
    else:
        if stop_reason == "max_tokens" and wire_blocks and wire_blocks[-1]["type"] == "tool_call":
            # The block the limit cut off still gets its content_block_stop, and a call cut before any argument
            # arrived even parses (as {}): the last call of a max_tokens reply was being written when the limit
            # came, so it is never kept (never run). The owner and, on the next request, the model are told.
            cut_call = wire_blocks.pop()["name"]
        result_stop = {
            "end_turn": "end_turn",
            "tool_use": "tool_use",
            "max_tokens": "max_tokens",
            "stop_sequence": "end_turn",
            "refusal": "refusal",
        }.get(stop_reason or "", stop_reason or "other")
    message = {
        "role": "assistant",
        "blocks": wire_blocks,
        # The thinking type this step was made with: the rest of its turn keeps it (one configuration per turn).
        "provider_state": {
            PROVIDER: {
                "message_id": message_id,
                "stop_reason": stop_reason,
                "thinking": (params.get("thinking") or {}).get("type"),
            }
        },
        "usage": usage.to_dict(),
    }
    if result_stop == "refusal":
        _record_refusal(message, stop_details or {})
    elif not stopped and cut_call is not None:
        words = CUT_CALL_NOTE.format(name=cut_call)
        message["meta"] = {"cut_call": cut_call, "notes": [words]}
    return ChatResult(message=message, usage=usage, stop_reason=result_stop, provider_ids={"message_id": message_id})


def _record_refusal(message: dict, details: dict) -> None:
    """A streaming refusal: what was written before the classifier stopped it is not kept as the answer (it is the
    refused content); the owner gets the refusal and its explanation in plain words, and the turn is marked so it
    is never replayed (build_messages resets the context past it, as Anthropic asks)."""
    category = details.get("category")
    explanation = details.get("explanation")
    words = "Claude declined to continue this answer: Anthropic's safety systems stopped it"
    words += f" ({category.replace('_', ' ')})." if category else "."
    if explanation:
        words += f" {explanation}"
    words += " This turn is left out of what the agent sends next; rephrase the request to go on."
    message["blocks"] = [text_block(words)]
    message["meta"] = {"refusal": {"category": category, "explanation": explanation}, "notes": [words]}


def refused(message: dict) -> bool:
    state = (message.get("provider_state") or {}).get(PROVIDER) or {}
    return state.get("stop_reason") == "refusal" or "refusal" in (message.get("meta") or {})


def _close_block(entry: dict | None) -> dict | None:
    if entry is None:
        return None
    kind = entry["kind"]
    if kind == "text":
        return text_block(entry["text"])
    if kind == "thinking":
        return {
            "type": "thinking",
            "text": entry["text"],
            "signature": entry.get("signature") or None,
            "provider": PROVIDER,
        }
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": entry["data"]}
    if kind == "tool_use":
        # An empty partial_json stream means a call with no arguments.
        return tool_call_block(id=entry["id"], name=entry["name"], arguments_raw=entry["json"] or "{}")
    return None


def count_input_tokens(request: ChatRequest) -> int:
    client, api_key = connect(request, PROVIDER)
    try:
        result = client.messages.count_tokens(**build_params(request, for_counting=True))
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    return int(result.input_tokens)


def check_credentials(request: ChatRequest) -> None:
    """One cheap call that proves the key works: the model list (free, no tokens)."""
    client, api_key = connect(request, PROVIDER)
    try:
        client.models.list(limit=1)
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
