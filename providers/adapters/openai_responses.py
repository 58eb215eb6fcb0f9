"""OpenAI Responses API adapter (provider "openai"): store=false, reasoning replayed from encrypted_content.

Stored form of an assistant turn:
- blocks, in output order: reasoning item -> thinking {text: summary, signature: encrypted_content, provider:
  "openai"}; message item -> one text block per output_text; function_call -> tool_call with the raw arguments.
- provider_state["openai"] = {"response_id", "items": [every closed output item exactly as received]}.
Replay walks the blocks and sends the stored item for each when there is one (so reasoning items, ids and `phase`
go back byte-identical and in place), and a portable item built from the block otherwise.
"""

from __future__ import annotations

from typing import Any

import openai

from ..attachments import FilePlan
from ..catalogue import capabilities
from ..errors import ProviderError, TruncatedStreamError, classify_status
from ..types import ChatRequest, ChatResult, Usage
from ..wire import text_block, tool_call_block
from .clients import CONTEXT_MARKERS, connect, key_fingerprint, map_error
from .common import Stream, data_url_parts, estimated_usage, image_placeholder, own_thinking, system_text

PROVIDER = "openai"
# Reasoning summaries need a verified organisation; an unverified one gets a 400 naming `reasoning.summary`.
# Which keys got it, by fingerprint, so later calls leave the summary out from the start (per process: a new
# worker learns it again with one refused request, which costs nothing).
_SUMMARY_REFUSED: set[str] = set()
SUMMARY_REFUSED_NOTE = (
    "Reasoning summaries are off for this OpenAI key: OpenAI generates them only for verified organisations "
    "(verify the organisation in OpenAI's settings to see the model's reasoning here)."
)
REASONING_EFFORT = {"low": "low", "medium": "medium", "high": "high", "minimal": "minimal"}


def _item_dict(item: Any) -> dict:
    # The SDK builds these without validation, so exclude_unset gives back exactly the keys the server sent.
    return item.to_dict(mode="json", exclude_unset=True) if hasattr(item, "to_dict") else dict(item)


# --- request ---------------------------------------------------------------------------------------------------


def _file_part(block: dict, files: FilePlan) -> dict:
    """An attached file as the Responses API documents it: `input_image` with a data URL for an image, `input_file`
    with `file_data` (a data URL) and `filename` for a PDF or a text file; text or a placeholder line otherwise."""
    prepared = files[block]
    if prepared.form != "native":
        return {"type": "input_text", "text": prepared.as_text()}
    if prepared.kind == "image":
        return {"type": "input_image", "image_url": prepared.data_url(), "detail": "auto"}
    return {
        "type": "input_file",
        "filename": _filename(prepared.name, prepared.media_type),
        "file_data": prepared.data_url(),
    }


# The API decides how to read an input_file by its filename's extension: a name without the one its type has (a
# "README" that is plain text) gets it appended.
EXTENSIONS = {
    "application/pdf": ".pdf",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/csv": ".csv",
    "application/json": ".json",
}


def _filename(name: str, media_type: str) -> str:
    extension = EXTENSIONS.get(media_type, "")
    return name if not extension or name.lower().endswith(extension) else f"{name}{extension}"


def _user_content(message: dict, files: FilePlan) -> list[dict]:
    content: list[dict] = []
    for block in message.get("blocks", []):
        kind = block.get("type")
        if kind == "text":
            content.append({"type": "input_text", "text": block["text"]})
        elif kind == "file":
            content.append(_file_part(block, files))
        elif kind == "image":
            ref = block.get("ref", "")
            if files.images and (data_url_parts(ref) or ref.startswith(("http://", "https://"))):
                content.append({"type": "input_image", "image_url": ref, "detail": "auto"})
            else:
                content.append({"type": "input_text", "text": image_placeholder(block, PROVIDER)})
    return content


def _assistant_items(message: dict, issuer: tuple[str, str] | None = None) -> list[dict]:
    state = (message.get("provider_state") or {}).get(PROVIDER) or {}
    if issuer is not None and "model" in state and (state.get("model"), state.get("key")) != issuer:
        # Encrypted reasoning is bound to the model and the account (key) that issued it: another one answers
        # "could not be verified". Such a reply goes back as portable items (its visible text and calls), like
        # another provider's; the ids of its stored items go with the reasoning they belonged to.
        state = {}
    stored = [i for i in state.get("items", []) if isinstance(i, dict)]
    reasoning = {
        i["encrypted_content"]: i for i in stored if i.get("type") == "reasoning" and i.get("encrypted_content")
    }
    calls = {i.get("call_id"): i for i in stored if i.get("type") == "function_call"}
    messages = [i for i in stored if i.get("type") == "message"]
    used: set[int] = set()
    items: list[dict] = []
    pending_text: list[str] = []

    def flush_text() -> None:
        if not pending_text:
            return
        for position, item in enumerate(messages):
            texts = [c.get("text") for c in item.get("content", []) if c.get("type") in ("output_text", "refusal")]
            if position not in used and texts == pending_text:
                used.add(position)
                items.append(item)
                break
        else:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": t, "annotations": []} for t in pending_text],
                }
            )
        pending_text.clear()

    for block in message.get("blocks", []):
        kind = block.get("type")
        if kind == "text":
            if block["text"]:
                pending_text.append(block["text"])
            continue
        if kind == "image":
            pending_text.append(image_placeholder(block, PROVIDER))
            continue
        flush_text()
        if kind == "thinking":
            # Only a reasoning item we still hold verbatim, with its encrypted content, can go back: with store=false
            # a bare rs_ id is refused ("Item with id ... not found"), and a summary alone cannot be verified.
            if own_thinking(block, PROVIDER) and block.get("signature") and block["signature"] in reasoning:
                items.append(reasoning[block["signature"]])
        elif kind == "tool_call":
            item = calls.get(block["id"])
            if item is not None:
                items.append({**item, "arguments": block["arguments_raw"]})
            else:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": block["id"],
                        "name": block["name"],
                        "arguments": block["arguments_raw"],  # a string: malformed JSON is sent as it was received
                    }
                )
        # redacted_thinking and unknown blocks have no Responses form: left out of the request.
    flush_text()
    # A conversation stored before reasoning was kept only with its following item must not fail every request.
    return keep_reasoning_followed(items)


def build_input(
    messages: list[dict], issuer: tuple[str, str] | None = None, files: FilePlan | None = None
) -> list[dict]:
    """The Responses input for `messages`; `issuer` (model, key fingerprint) of the request about to be sent, so
    reasoning another model or key issued is left out; `files` what each attached file becomes (built from the
    messages for the issuer's model when not given)."""
    if files is None:
        files = FilePlan(PROVIDER, issuer[0] if issuer else "", messages)
    items: list[dict] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        if role == "user":
            content = _user_content(message, files)
            if content:
                items.append({"type": "message", "role": "user", "content": content})
        elif role == "assistant":
            items.extend(_assistant_items(message, issuer))
        elif role == "tool":
            for block in message.get("blocks", []):
                if block.get("type") == "tool_result":
                    output = block["content"]
                    if block.get("is_error"):
                        output = f"[tool error] {output}"
                    items.append({"type": "function_call_output", "call_id": block["tool_call_id"], "output": output})
    return items


def reasoning_effort(request: ChatRequest, caps) -> str | None:
    """reasoning.effort for this model family, or None to leave it to the model's default."""
    level = request.settings.thinking
    if not level or caps.thinking != "effort":
        return None
    if level == "off":
        return caps.thinking_off  # "none" (gpt-5.1+), "minimal" (gpt-5), "low" (o-series: cannot be off)
    wanted = REASONING_EFFORT.get(level, "medium")
    if caps.effort_levels and wanted not in caps.effort_levels:
        wanted = "low" if wanted == "minimal" else "medium"
    return wanted


def _summary_refused(exc: Exception) -> bool:
    """Is this the 400 an unverified organisation gets for asking for reasoning summaries?"""
    if not isinstance(exc, openai.BadRequestError):
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    return error.get("param") == "reasoning.summary" or "verified to generate reasoning summaries" in str(
        error.get("message") or exc.message
    )


def build_params(request: ChatRequest) -> dict:
    issuer = (request.model, key_fingerprint(request, PROVIDER))
    params: dict[str, Any] = {"model": request.model, "input": build_input(request.messages, issuer), "store": False}
    caps = capabilities(PROVIDER, request.model)
    # Every model that can reason gets its reasoning back encrypted: with store=false a reasoning item can only be
    # replayed with its encrypted_content. Models that cannot reason refuse the include ("Encrypted content is not
    # supported with this model"), so the catalogue family decides, with unknown names treated as reasoning.
    if caps.reasoning:
        params["include"] = ["reasoning.encrypted_content"]
    instructions = system_text(request.messages)
    if instructions:
        params["instructions"] = instructions
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": False,
            }
            for tool in request.tools
        ]
    settings = request.settings
    if settings.max_output_tokens:
        params["max_output_tokens"] = settings.max_output_tokens
    if settings.temperature is not None and caps.temperature:
        params["temperature"] = settings.temperature  # reasoning families refuse it ("Unsupported parameter")
    effort = reasoning_effort(request, caps)
    if effort:
        summary = effort != "none" and key_fingerprint(request, PROVIDER) not in _SUMMARY_REFUSED
        params["reasoning"] = {"effort": effort, "summary": "auto"} if summary else {"effort": effort}
    return params


def keep_reasoning_followed(items: list[dict]) -> list[dict]:
    """Drop every reasoning item not directly followed by the item it produced (a call or message the token limit
    or a Stop cut off): the API refuses such an item on every later request ("... was provided without its
    required following item")."""
    kept: list[dict] = []
    for position, item in enumerate(items):
        if item.get("type") == "reasoning":
            nxt = items[position + 1] if position + 1 < len(items) else None
            if nxt is None or nxt.get("type") == "reasoning":
                continue
        kept.append(item)
    return kept


# --- response --------------------------------------------------------------------------------------------------


def blocks_from_items(items: list[dict]) -> list[dict]:
    blocks: list[dict] = []
    for item in items:
        kind = item.get("type")
        if kind == "reasoning":
            summary = "\n\n".join(s.get("text", "") for s in item.get("summary") or [])
            blocks.append(
                {"type": "thinking", "text": summary, "signature": item.get("encrypted_content"), "provider": PROVIDER}
            )
        elif kind == "message":
            for content in item.get("content") or []:
                if content.get("type") == "output_text":
                    blocks.append(text_block(content.get("text", "")))
                elif content.get("type") == "refusal":
                    blocks.append(text_block(content.get("refusal", "")))
        elif kind == "function_call":
            blocks.append(
                tool_call_block(id=item["call_id"], name=item["name"], arguments_raw=item.get("arguments", ""))
            )
    return blocks


def _usage(raw: dict | None) -> Usage:
    raw = raw or {}
    details = raw.get("input_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        # Newer models report prompt-cache writes, priced above plain input (part of input_tokens, like reads).
        cache_creation_tokens=int(details.get("cache_write_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        reasoning_tokens=int((raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
    )


def _stream_error(event: dict) -> ProviderError:
    code = event.get("code") or ""
    text = f"{event.get('message', 'stream error')} ({code})" if code else event.get("message", "stream error")
    status = {"rate_limit_exceeded": 429, "context_length_exceeded": 400, "invalid_request_error": 400}.get(code, 500)
    return classify_status(status, text, provider=PROVIDER, context_markers=CONTEXT_MARKERS[PROVIDER])


def chat(request: ChatRequest, stream: Stream) -> ChatResult:
    client, api_key = connect(request, PROVIDER)
    params = build_params(request)
    closed: dict[int, dict] = {}
    open_items: dict[str, dict] = {}  # item id -> {"type", "call_id", "text"}
    final: dict | None = None
    response_id: str | None = None
    received_any = False
    stopped = False
    notes: list[str] = []
    try:
        try:
            events = client.responses.create(stream=True, **params)
        except openai.BadRequestError as exc:
            if not _summary_refused(exc) or "summary" not in params.get("reasoning", {}):
                raise
            # Refused before any work (nothing billed): the same request once more without the summary.
            _SUMMARY_REFUSED.add(key_fingerprint(request, PROVIDER))
            params["reasoning"] = {"effort": params["reasoning"]["effort"]}
            events = client.responses.create(stream=True, **params)
        reasoning = params.get("reasoning") or {}
        if reasoning.get("effort", "none") != "none" and "summary" not in reasoning:
            notes.append(SUMMARY_REFUSED_NOTE)
        try:
            for event in stream.pump(events, events.close):
                received_any = True
                data = _item_dict(event)
                kind = data.get("type")
                if kind == "response.created":
                    response_id = (data.get("response") or {}).get("id")
                elif kind == "response.output_item.added":
                    item = data.get("item") or {}
                    open_items[item.get("id")] = {"type": item.get("type"), "call_id": item.get("call_id"), "text": ""}
                    if item.get("type") == "function_call":
                        stream.emit({"type": "tool_call_start", "id": item.get("call_id"), "name": item.get("name")})
                    elif item.get("type") == "reasoning":
                        stream.emit({"type": "thinking_start"})
                elif kind == "response.output_text.delta":
                    entry = open_items.get(data.get("item_id"))
                    if entry is not None:
                        entry["text"] += data.get("delta", "")
                    stream.emit({"type": "text_delta", "text": data.get("delta", "")})
                elif kind == "response.function_call_arguments.delta":
                    entry = open_items.get(data.get("item_id")) or {}
                    stream.emit({"type": "tool_call_delta", "id": entry.get("call_id"), "delta": data.get("delta", "")})
                elif kind == "response.output_item.done":
                    # Only the done event carries the complete encrypted_content; the added one may be partial.
                    item = data.get("item") or {}
                    closed[int(data.get("output_index", len(closed)))] = item
                    open_items.pop(item.get("id"), None)
                    if item.get("type") == "reasoning":
                        stream.emit({"type": "thinking_end"})
                elif kind in ("response.completed", "response.incomplete"):
                    final = data.get("response") or {}
                    break
                elif kind == "response.failed":
                    error = (data.get("response") or {}).get("error") or {}
                    raise _stream_error({"code": error.get("code"), "message": error.get("message", "response failed")})
                elif kind == "error":
                    raise _stream_error(data)
                if stream.stopped():
                    stopped = True
                    break
        finally:
            events.close()
    except ProviderError:
        raise
    except openai.APIConnectionError as exc:
        if received_any:
            raise TruncatedStreamError(
                f"{PROVIDER}: the stream broke before response.completed", provider=PROVIDER
            ) from exc
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc

    stopped = stopped or stream.stop_requested
    if final is None and not stopped:
        raise TruncatedStreamError(f"{PROVIDER}: the stream ended before response.completed", provider=PROVIDER)

    if stopped:
        items = [closed[i] for i in sorted(closed)]
        # The item a trailing reasoning produced never completed: an interrupted reply keeps neither.
        items = keep_reasoning_followed(items)
        blocks = blocks_from_items(items)
        # Partial text of a message still streaming is kept, marked; a half-received call or reasoning is not.
        for entry in open_items.values():
            if entry["type"] == "message" and entry["text"]:
                blocks.append(text_block(entry["text"], stopped=True))
        usage = estimated_usage(request, blocks)
        stop_reason = "stopped"
    else:
        items = list(final.get("output") or []) or [closed[i] for i in sorted(closed)]
        # A call cut off by max_output_tokens is half-received: it is not kept.
        items = [i for i in items if not (i.get("type") == "function_call" and i.get("status") == "incomplete")]
        items = keep_reasoning_followed(items)
        blocks = blocks_from_items(items)
        usage = _usage(final.get("usage"))
        response_id = final.get("id") or response_id
        if final.get("status") == "incomplete":
            reason = (final.get("incomplete_details") or {}).get("reason")
            stop_reason = (
                "max_tokens" if reason == "max_output_tokens" else "refusal" if reason == "content_filter" else "other"
            )
        elif any(b["type"] == "tool_call" for b in blocks):
            stop_reason = "tool_use"
        else:
            stop_reason = "end_turn"
    message = {
        "role": "assistant",
        "blocks": blocks,
        # Who issued the encrypted reasoning: only the same model and key can have it back.
        "provider_state": {
            PROVIDER: {
                "response_id": response_id,
                "items": items,
                "model": request.model,
                "key": key_fingerprint(request, PROVIDER),
            }
        },
        "usage": usage.to_dict(),
    }
    if notes:
        message["meta"] = {"notes": notes}  # shown with the message in the Context panel
    return ChatResult(message=message, usage=usage, stop_reason=stop_reason, provider_ids={"response_id": response_id})


def count_input_tokens(request: ChatRequest) -> int:
    client, api_key = connect(request, PROVIDER)
    params = build_params(request)
    params.pop("include", None)
    params.pop("store", None)
    params.pop("max_output_tokens", None)
    params.pop("temperature", None)
    try:
        result = client.responses.input_tokens.count(**params)
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
    return int(result.input_tokens)


def check_credentials(request: ChatRequest) -> None:
    """One cheap call that proves the key works: the model list (free, no tokens)."""
    client, api_key = connect(request, PROVIDER)
    try:
        client.models.list()
    except Exception as exc:
        raise map_error(exc, provider=PROVIDER, api_key=api_key) from exc
