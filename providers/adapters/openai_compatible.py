"""OpenAI-compatible Chat Completions adapter (provider "openai_compatible": Ollama, vLLM, llama.cpp, ...).

Portable by default. Servers that stream `reasoning_content` get it stored as a thinking block (unsigned: these
servers have no signatures); it is sent back on the assistant message only when the model's catalogue entry says
`replay_reasoning: true` (the capability check), otherwise the request is the portable form without it.
"""

from __future__ import annotations

from typing import Any

import openai

from ..attachments import FilePlan, Prepared
from ..catalogue import capabilities
from ..errors import ProviderError, TruncatedStreamError
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
)

PROVIDER = "openai_compatible"


def _merge_consecutive_users(out: list[dict]) -> list[dict]:
    """Chat templates that require user/assistant alternation (Mistral, Llama 2, Gemma, ...) refuse two user
    messages in a row, which compaction (summary + next user message) and a dropped empty reply leave behind:
    they are sent as one user message."""
    merged: list[dict] = []
    for message in out:
        previous = merged[-1] if merged else None
        if previous is not None and previous["role"] == "user" and message["role"] == "user":
            if isinstance(previous["content"], str) and isinstance(message["content"], str):
                previous["content"] = f"{previous['content']}\n\n{message['content']}"
            else:
                as_parts = [
                    c if isinstance(c, list) else [{"type": "text", "text": c}]
                    for c in (previous["content"], message["content"])
                ]
                previous["content"] = as_parts[0] + as_parts[1]
            continue
        merged.append(dict(message))
    return merged


def _file_part(prepared: Prepared) -> dict:
    """An attached file for a Chat Completions server: an `image_url` part (a data URL) when the catalogue says the
    model takes images; a PDF as the documented `file` part only for a family marked as taking documents; the text
    (or a placeholder line) otherwise: most servers take no file parts."""
    if prepared.form != "native":
        return {"type": "text", "text": prepared.as_text()}
    if prepared.kind == "image":
        return {"type": "image_url", "image_url": {"url": prepared.data_url()}}
    if prepared.kind == "pdf":
        return {"type": "file", "file": {"filename": prepared.name, "file_data": prepared.data_url()}}
    return {"type": "text", "text": f'[file "{prepared.name}"]\n{prepared.data.decode("utf-8", errors="replace")}'}


def build_messages(
    messages: list[dict],
    *,
    replay_reasoning: bool,
    alternate_roles: bool = False,
    files: FilePlan | None = None,
) -> list[dict]:
    if files is None:
        files = FilePlan(PROVIDER, "", messages)
    out: list[dict] = []
    system = system_text(messages)
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        role = message.get("role")
        blocks = message.get("blocks", [])
        if role == "user":
            parts: list[dict] = []
            for block in blocks:
                if block.get("type") == "text" and block["text"]:
                    parts.append({"type": "text", "text": block["text"]})
                elif block.get("type") == "image":
                    ref = block.get("ref", "")
                    # image_url only where the catalogue says the model takes images: a text-only model's server
                    # refuses the whole request for it.
                    if files.images and (data_url_parts(ref) or ref.startswith(("http://", "https://"))):
                        parts.append({"type": "image_url", "image_url": {"url": ref}})
                    else:
                        parts.append({"type": "text", "text": image_placeholder(block, PROVIDER)})
                elif block.get("type") == "file":
                    parts.append(_file_part(files[block]))
            if parts:
                only_text = all(p["type"] == "text" for p in parts)
                content: Any = "\n".join(p["text"] for p in parts) if only_text else parts
                out.append({"role": "user", "content": content})
        elif role == "assistant":
            texts = [b["text"] for b in blocks if b.get("type") == "text" and b["text"]]
            texts += [image_placeholder(b, PROVIDER) for b in blocks if b.get("type") == "image"]
            calls = []
            for b in blocks:
                if b.get("type") != "tool_call":
                    continue
                # vLLM, llama.cpp and others parse history arguments as JSON and refuse the whole request (on
                # every later turn) when they are not: malformed arguments go as {} with a note quoting them.
                arguments, note = object_arguments(b)
                if note:
                    texts.append(note)
                calls.append(
                    {
                        "id": b["id"],
                        "type": "function",
                        "function": {"name": b["name"], "arguments": b["arguments_raw"] if not note else "{}"},
                    }
                )
            entry: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
            if calls:
                entry["tool_calls"] = calls
            # Reasoning goes back when the family needs it, and whenever the server itself sent it beside tool calls
            # (DeepSeek's thinking-mode rule: such a turn's reasoning must come back in every later request, or 400),
            # on the field the server used.
            state = (message.get("provider_state") or {}).get(PROVIDER) or {}
            field = state.get("reasoning_field") or "reasoning_content"
            if replay_reasoning or (calls and state.get("reasoning_with_calls")):
                reasoning = "".join(
                    b["text"] for b in blocks if b.get("type") == "thinking" and own_thinking(b, PROVIDER)
                )
                if reasoning:
                    entry[field] = reasoning
            if entry["content"] is not None or calls:
                out.append(entry)
        elif role == "tool":
            for block in blocks:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    if block.get("is_error"):
                        content = f"[tool error] {content}"
                    out.append({"role": "tool", "tool_call_id": block["tool_call_id"], "content": content})
    return _merge_consecutive_users(out) if alternate_roles else out


def build_params(request: ChatRequest) -> dict:
    caps = capabilities(PROVIDER, request.model)
    params: dict[str, Any] = {
        "model": request.model,
        "messages": build_messages(
            request.messages,
            replay_reasoning=caps.replay_reasoning,
            alternate_roles=caps.alternate_roles,
            files=FilePlan(PROVIDER, request.model, request.messages),
        ),
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in request.tools
        ]
    settings = request.settings
    if settings.temperature is not None and caps.temperature:
        params["temperature"] = settings.temperature
    if settings.max_output_tokens:
        params["max_tokens"] = settings.max_output_tokens
    return params


def chat(request: ChatRequest, stream: Stream) -> ChatResult:
    client, api_key = connect(request, PROVIDER)
    params = build_params(request)
    reasoning = ""
    reasoning_field: str | None = None
    reasoning_open = False
    text = ""
    calls: dict[int, dict] = {}
    finish: str | None = None
    usage = Usage()
    completion_id = None
    stopped = False
    received_any = False
    try:
        chunks = client.chat.completions.create(stream=True, **params)
        try:
            for chunk in stream.pump(chunks, chunks.close):
                received_any = True
                completion_id = completion_id or chunk.id
                if chunk.usage is not None:
                    raw = chunk.usage
                    usage.input_tokens = int(raw.prompt_tokens or 0)
                    usage.output_tokens = int(raw.completion_tokens or 0)
                    usage.cached_tokens = int(getattr(raw.prompt_tokens_details, "cached_tokens", 0) or 0)
                    usage.cache_creation_tokens = int(getattr(raw.prompt_tokens_details, "cache_write_tokens", 0) or 0)
                    usage.reasoning_tokens = int(getattr(raw.completion_tokens_details, "reasoning_tokens", 0) or 0)
                for choice in chunk.choices or []:
                    delta = choice.delta
                    extra = delta.model_extra or {}
                    piece = extra.get("reasoning_content") or extra.get("reasoning")
                    if piece:
                        reasoning_field = "reasoning_content" if extra.get("reasoning_content") else "reasoning"
                        if not reasoning_open:
                            reasoning_open = True
                            stream.emit({"type": "thinking_start"})
                        reasoning += piece
                    if delta.content:
                        if reasoning_open:
                            reasoning_open = False
                            stream.emit({"type": "thinking_end"})
                        text += delta.content
                        stream.emit({"type": "text_delta", "text": delta.content})
                    for call in delta.tool_calls or []:
                        if reasoning_open:
                            reasoning_open = False
                            stream.emit({"type": "thinking_end"})
                        entry = calls.get(call.index)
                        if entry is None:
                            # Some servers send calls without an id; a stored call needs one (and its result must
                            # name it), so one is made from the completion id and the call's position.
                            call_id = call.id or f"call_{completion_id or 'local'}_{call.index}"
                            entry = calls[call.index] = {"id": call_id, "name": "", "arguments": ""}
                            if call.function and call.function.name:
                                entry["name"] = call.function.name
                            stream.emit({"type": "tool_call_start", "id": entry["id"], "name": entry["name"]})
                        if call.function and call.function.arguments:
                            entry["arguments"] += call.function.arguments
                            stream.emit(
                                {"type": "tool_call_delta", "id": entry["id"], "delta": call.function.arguments}
                            )
                    if choice.finish_reason:
                        finish = choice.finish_reason
                if finish is None and stream.stopped():
                    stopped = True
                    break
        finally:
            chunks.close()
    except ProviderError:
        raise
    except openai.APIConnectionError as exc:
        if received_any and not isinstance(exc.__cause__, ProviderError):
            raise TruncatedStreamError(f"{PROVIDER}: the stream broke before finish_reason", provider=PROVIDER) from exc
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc

    stopped = stopped or stream.stop_requested
    if finish is None and not stopped:
        raise TruncatedStreamError(f"{PROVIDER}: the stream ended without a finish_reason", provider=PROVIDER)
    blocks: list[dict] = []
    if stopped:
        # These servers never sign reasoning, and an interrupted reply keeps no unsigned thinking; tool calls are
        # never complete before finish_reason. Only the partial text survives.
        if text:
            blocks.append(text_block(text, stopped=True))
        stop_reason = "stopped"
        usage = estimated_usage(request, blocks)
    else:
        if reasoning:
            blocks.append({"type": "thinking", "text": reasoning, "signature": None, "provider": PROVIDER})
        if text:
            blocks.append(text_block(text))
        for index in sorted(calls):
            call = calls[index]
            block = tool_call_block(id=call["id"], name=call["name"], arguments_raw=call["arguments"])
            if finish == "length" and block.get("parse_error"):
                continue  # cut off by the token limit: half-received, not kept
            blocks.append(block)
        stop_reason = {
            "stop": "end_turn",
            "tool_calls": "tool_use",
            "length": "max_tokens",
            "content_filter": "refusal",
        }.get(finish, "other")
        if stop_reason == "end_turn" and calls:
            stop_reason = "tool_use"
    state: dict[str, Any] = {"completion_id": completion_id, "finish_reason": finish}
    if reasoning_field and any(b["type"] == "thinking" for b in blocks):
        state["reasoning_field"] = reasoning_field
        state["reasoning_with_calls"] = any(b["type"] == "tool_call" for b in blocks)
    message = {
        "role": "assistant",
        "blocks": blocks,
        "provider_state": {PROVIDER: state},
        "usage": usage.to_dict(),
    }
    return ChatResult(
        message=message, usage=usage, stop_reason=stop_reason, provider_ids={"completion_id": completion_id}
    )


def check_credentials(request: ChatRequest) -> None:
    """One cheap call that proves the key and base URL work: the server's model list."""
    client, api_key = connect(request, PROVIDER)
    try:
        client.models.list()
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
