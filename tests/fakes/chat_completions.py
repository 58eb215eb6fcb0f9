"""Fake OpenAI-compatible Chat Completions server (POST /v1/chat/completions, SSE chunks, `data: [DONE]`).

Options, each a server family's documented behaviour:
- `reasoning_replay=True`: streams `reasoning_content` and requires it back on assistant tool-call messages
  (DeepSeek thinking mode).
- `json_arguments=True`: parses every history tool call's arguments as JSON (vLLM, llama.cpp) and refuses the
  request when they are not an object.
- `alternating_roles=True`: a chat template that raises unless user and assistant alternate (Mistral, Llama 2,
  Gemma templates).
- `omit_call_ids=True`: streams tool calls without an `id` (some local servers).
- `usage_every_chunk=True`: a cumulative `usage` on every chunk (vLLM's continuous usage stats)."""

from __future__ import annotations

import json
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
from .openai_models import model_list


def _split(text: str) -> list[str]:
    middle = max(1, len(text) // 2)
    return [text[:middle], text[middle:]] if len(text) > 1 else [text]


class FakeChatCompletions(FakeProviderServer):
    provider = "openai_compatible"

    def __init__(
        self,
        *,
        reasoning_replay: bool = False,
        json_arguments: bool = False,
        alternating_roles: bool = False,
        omit_call_ids: bool = False,
        usage_every_chunk: bool = False,
    ) -> None:
        super().__init__()
        self.reasoning_replay = reasoning_replay
        self.json_arguments = json_arguments
        self.alternating_roles = alternating_roles
        self.omit_call_ids = omit_call_ids
        self.usage_every_chunk = usage_every_chunk
        self.issued_reasoning: dict[str, str] = {}  # first tool call id of a reply -> its reasoning text
        # Models the server serves with a vision encoder: only they take `image_url` parts (vLLM and Ollama refuse
        # images for a text-only model); no server here takes `file` parts.
        self.vision_models: set[str] = set()

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def handle_other(self, request: RecordedRequest) -> RawReply | None:
        if request.method == "GET" and request.path == "/v1/models":
            return model_list(self, request, "local-model")
        return None

    def _check_parts(self, index: int, message: dict, model: str) -> None:
        content = message.get("content")
        if not isinstance(content, list):
            return
        for part in content:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                continue
            if kind == "image_url":
                url = (part.get("image_url") or {}).get("url")
                if not isinstance(url, str) or not url.startswith(("data:image/", "http://", "https://")):
                    raise Rejected(ErrorReply(400, f"messages[{index}].content.image_url.url: invalid image URL"))
                if model not in self.vision_models:
                    raise Rejected(ErrorReply(400, f"{model} is not a multimodal model"))
                continue
            raise Rejected(ErrorReply(400, f"messages[{index}].content: unknown content part type {kind!r}"))

    def validate(self, request: RecordedRequest) -> None:
        if request.path != "/v1/chat/completions":
            raise Rejected(ErrorReply(404, f"Invalid URL (POST {request.path})"))
        messages = (request.body or {}).get("messages") or []
        if self.alternating_roles:
            previous_role = None
            for message in messages:
                role = message.get("role")
                if role in ("user", "assistant") and role == previous_role:
                    raise Rejected(
                        ErrorReply(400, "Conversation roles must alternate user/assistant/user/assistant/...")
                    )
                if role in ("user", "assistant"):
                    previous_role = role
                else:
                    previous_role = None  # tool results sit between the two turns: only adjacent messages clash
        model = str((request.body or {}).get("model"))
        for index, message in enumerate(messages):
            role = message.get("role")
            self._check_parts(index, message, model)
            for call in message.get("tool_calls") or []:
                if not isinstance(call.get("id"), str) or not call["id"]:
                    raise Rejected(ErrorReply(400, f"messages[{index}].tool_calls.id: Field required"))
                arguments = (call.get("function") or {}).get("arguments")
                if self.json_arguments and isinstance(arguments, str):
                    try:
                        parsed = json.loads(arguments)
                    except ValueError as exc:
                        raise Rejected(ErrorReply(400, f"Failed to parse tool call arguments as JSON: {exc}")) from None
                    if not isinstance(parsed, dict):
                        raise Rejected(ErrorReply(400, "Failed to parse tool call arguments as JSON: not an object"))
            if role == "assistant" and message.get("tool_calls"):
                ids = [c.get("id") for c in message["tool_calls"]]
                answered = set()
                for later in messages[index + 1 :]:
                    if later.get("role") != "tool":
                        break
                    answered.add(later.get("tool_call_id"))
                missing = [i for i in ids if i not in answered]
                if missing:
                    raise Rejected(
                        ErrorReply(
                            400,
                            "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                            "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                            + ", ".join(missing),
                        )
                    )
                expected = self.issued_reasoning.get(ids[0])
                if self.reasoning_replay and expected is not None and message.get("reasoning_content") != expected:
                    raise Rejected(
                        ErrorReply(400, "The reasoning_content in the thinking mode must be passed back to the API.")
                    )
                for call in message["tool_calls"]:
                    if not isinstance((call.get("function") or {}).get("arguments"), str):
                        raise Rejected(
                            ErrorReply(400, f"messages[{index}].tool_calls.function.arguments: must be a string")
                        )
            if role == "tool":
                previous = next((m for m in reversed(messages[:index]) if m.get("role") != "tool"), None)
                ids = [c.get("id") for c in (previous or {}).get("tool_calls") or []]
                if message.get("tool_call_id") not in ids:
                    raise Rejected(
                        ErrorReply(
                            400,
                            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                            "with 'tool_calls'.",
                        )
                    )

    def render_error(self, error: ErrorReply) -> RawReply:
        body = {
            "error": {
                "message": error.message,
                "type": error.kind or ("invalid_request_error" if error.status < 500 else "server_error"),
                "param": None,
                "code": None,
            }
        }
        return json_reply(error.status, body, error.headers)

    def render(self, request: RecordedRequest, turn: Turn) -> SSE:
        body = request.body or {}
        completion_id = self.next_id("chatcmpl")
        created = int(time.time())
        frames: list[bytes] = []
        labels: list[str] = []

        produced = 0

        def chunk(delta: dict | None, label: str = "", finish: str | None = None, usage: dict | None = None) -> None:
            nonlocal produced
            if usage is None and self.usage_every_chunk and delta is not None:
                produced += 1
                usage = {
                    "prompt_tokens": turn.input_tokens,
                    "completion_tokens": min(produced, turn.output_tokens),
                    "total_tokens": turn.input_tokens + min(produced, turn.output_tokens),
                }
            data = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.get("model", "local-model"),
                "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if usage is not None:
                data["usage"] = usage
            frames.append(sse_frame(data))
            labels.append(label)

        chunk({"role": "assistant", "content": ""})
        reasoning = ""
        call_index = 0
        first_call_id = None
        for part in turn.parts:
            if isinstance(part, Think):
                reasoning += part.text
                for piece in _split(part.text):
                    chunk({"reasoning_content": piece}, "thinking_delta")
            elif isinstance(part, Text):
                for piece in _split(part.text):
                    chunk({"content": piece}, "text_delta")
            elif isinstance(part, Call):
                call_id = part.id or self.next_id("call")
                first_call_id = first_call_id or call_id
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": call_index,
                                **({} if self.omit_call_ids else {"id": call_id}),
                                "type": "function",
                                "function": {"name": part.name, "arguments": ""},
                            }
                        ]
                    }
                )
                for piece in _split(part.arguments) if part.arguments else []:
                    chunk({"tool_calls": [{"index": call_index, "function": {"arguments": piece}}]}, "tool_call_delta")
                call_index += 1
            else:
                raise AssertionError(f"chat completions fake cannot render {part!r}")
        if first_call_id and reasoning:
            self.issued_reasoning[first_call_id] = reasoning
        finish = "length" if turn.stop == "max_tokens" else "tool_calls" if call_index else "stop"
        chunk({}, "terminal", finish=finish)
        chunk(
            None,
            usage={
                "prompt_tokens": turn.input_tokens,
                "completion_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
                "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
                "completion_tokens_details": {"reasoning_tokens": turn.reasoning_tokens},
            },
        )
        frames.append(b"data: [DONE]\n\n")
        labels.append("")
        return stream_of(frames, labels, turn)
