"""The Claude Agent SDK's messages as MessageWire, as they arrive, and the step's result when the run ends (a Stop
keeps the text that was streaming and answers every call left open)."""

from __future__ import annotations

import json

from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from ...adapters.common import estimated_usage
from ...types import ChatRequest, ChatResult, Usage
from ...wire import text_block, tool_call_block, tool_result_message
from .launch import MCP_SERVER
from .session import PROVIDER

_PROJECT_TOOL_PREFIX = f"mcp__{MCP_SERVER}__"


def _step_call(call_id: str, name: str, arguments) -> dict:
    # The chat names a project tool as the agent's form does ("memory"), not by its MCP address; the stored
    # conversation keeps the name as observed.
    return {"id": call_id, "name": name.removeprefix(_PROJECT_TOOL_PREFIX), "arguments": arguments}


class Collector:
    """Turns the SDK's messages into MessageWire as they arrive, and keeps what a stop leaves half-received."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.observed: list[dict] = []
        self.result: dict | None = None
        self.call_names: dict[str, str] = {}
        self.answered: set[str] = set()
        self._blocks_seen: dict[str, int] = {}  # API message id -> blocks received as AssistantMessages
        self._partial: dict[int, dict] = {}  # index -> {"kind", "text"} of the API message streaming now
        self._partial_id: str | None = None

    def add(self, item) -> None:
        if isinstance(item, StreamEvent):
            self._event(item.event)
        elif isinstance(item, AssistantMessage):
            self._assistant(item)
        elif isinstance(item, UserMessage):
            self._user(item)
        elif isinstance(item, ResultMessage):
            self.result = {
                "subtype": item.subtype,
                "is_error": item.is_error,
                "session_id": item.session_id,
                "stop_reason": item.stop_reason,
                "total_cost_usd": item.total_cost_usd,
                "usage": item.usage or {},
                "num_turns": item.num_turns,
                "result": item.result,
                "errors": getattr(item, "errors", None),
                "api_error_status": getattr(item, "api_error_status", None),
            }

    def _event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._partial_id = (event.get("message") or {}).get("id")
            self._partial = {}
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self._partial[event.get("index", 0)] = {"kind": block.get("type"), "text": ""}
            if block.get("type") == "thinking":
                self.stream.emit({"type": "thinking_start"})
            elif block.get("type") == "tool_use":
                self.stream.emit({"type": "tool_call_start", "id": block.get("id"), "name": block.get("name")})
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            entry = self._partial.get(event.get("index", 0))
            if delta.get("type") == "text_delta":
                if entry is not None:
                    entry["text"] += delta.get("text", "")
                self.stream.emit({"type": "text_delta", "text": delta.get("text", "")})
        elif kind == "content_block_stop":
            entry = self._partial.get(event.get("index", 0))
            if entry is not None and entry["kind"] == "thinking":
                self.stream.emit({"type": "thinking_end"})

    def _assistant(self, item) -> None:
        blocks = []
        for block in item.content:
            if isinstance(block, TextBlock):
                blocks.append(text_block(block.text))
            elif isinstance(block, ThinkingBlock):
                thinking = {"type": "thinking", "text": block.thinking, "signature": block.signature or None}
                blocks.append({**thinking, "provider": PROVIDER})
            elif isinstance(block, ToolUseBlock):
                self.call_names[block.id] = block.name
                blocks.append(tool_call_block(id=block.id, name=block.name, arguments_raw=json.dumps(block.input)))
                # Shown as a step while the run goes on, like a native tool call (chat/observer.py).
                step = _step_call(block.id, block.name, block.input)
                self.stream.emit({"type": "runtime_step", "phase": "started", "tool_call": step, "result": None})
            else:  # a block kind this version does not model: kept as observed, under its own type
                data = getattr(block, "__dict__", {})
                data = json.loads(json.dumps(data, default=str))
                blocks.append({"type": f"claude_code_{type(block).__name__}", "data": data})
        message_id = item.message_id or ""
        self._blocks_seen[message_id] = self._blocks_seen.get(message_id, 0) + len(item.content)
        last = self.observed[-1] if self.observed else None
        # The SDK hands one AssistantMessage per content block; the API message they belong to is one message.
        if last is not None and last["role"] == "assistant" and message_id and last["meta"]["message_id"] == message_id:
            last["blocks"].extend(blocks)
            if item.usage:
                last["usage"] = item.usage
            return
        message = {"role": "assistant", "blocks": blocks, "meta": {"message_id": message_id, "model": item.model}}
        if item.usage:
            message["usage"] = item.usage
        self.observed.append(message)

    def _user(self, item) -> None:
        if not isinstance(item.content, list):
            return  # the prompt (already the firing's user message) or a runtime-injected text
        for block in item.content:
            if not isinstance(block, ToolResultBlock):
                continue
            content = block.content
            if isinstance(content, list):
                content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
            self.answered.add(block.tool_use_id)
            step = _step_call(block.tool_use_id, self.call_names.get(block.tool_use_id, ""), None)
            outcome = {"is_error": bool(block.is_error), "content": content or ""}
            self.stream.emit({"type": "runtime_step", "phase": "finished", "tool_call": step, "result": outcome})
            self.observed.append(
                tool_result_message(
                    tool_call_id=block.tool_use_id,
                    name=self.call_names.get(block.tool_use_id, ""),
                    content=content or "",
                    is_error=bool(block.is_error),
                )
            )

    def finish(
        self,
        request: ChatRequest,
        *,
        session_id: str,
        resumed: bool,
        note: str | None,
        previous_cost: float,
        transcript: str,
        stopped: bool,
        timed_out: bool,
    ) -> ChatResult:
        observed = self.observed
        if stopped:
            seen = self._blocks_seen.get(self._partial_id or "", 0)
            partial = [
                text_block(entry["text"], stopped=True)
                for index, entry in sorted(self._partial.items())
                if index >= seen and entry["kind"] == "text" and entry["text"]
            ]
            if partial:
                last = observed[-1] if observed else None
                if last is not None and last["role"] == "assistant" and last["meta"]["message_id"] == self._partial_id:
                    last["blocks"].extend(partial)
                else:
                    meta = {"message_id": self._partial_id or ""}
                    observed.append({"role": "assistant", "blocks": partial, "meta": meta})
            # Calls the run made but whose answer never arrived: say so, so the list stays a valid conversation.
            tail: list[dict] = []
            for message in observed:
                for block in message["blocks"]:
                    if block.get("type") == "tool_call" and block["id"] not in self.answered:
                        tail.append(
                            tool_result_message(
                                tool_call_id=block["id"],
                                name=block["name"],
                                content="No result observed: the run was stopped before this tool answered.",
                                is_error=True,
                            )
                        )
            if tail:
                observed.extend(tail)
        if not observed or observed[-1]["role"] != "assistant":
            # Every firing's list ends with an answer: after tool results with no final text, an empty stopped one.
            blocks = [text_block("", stopped=True)] if stopped else []
            observed.append({"role": "assistant", "blocks": blocks, "meta": {}})
        result = self.result or {}
        raw = result.get("usage") or {}
        cached = int(raw.get("cache_read_input_tokens") or 0)
        written = int(raw.get("cache_creation_input_tokens") or 0)
        if raw:
            usage = Usage(
                input_tokens=int(raw.get("input_tokens") or 0) + cached + written,
                cached_tokens=cached,
                cache_creation_tokens=written,
                output_tokens=int(raw.get("output_tokens") or 0),
            )
        else:
            # Stopped or timed out before the CLI's result: no usage and no cost came, but the calls were made and
            # billed. Estimated as the native adapters do (the input it was sent, what it wrote), marked estimated.
            usage = estimated_usage(request, _assistant_blocks(observed))
        total_cost = result.get("total_cost_usd")
        if total_cost is not None:
            # Cumulative over the session (resume included): this run cost the difference.
            usage.cost_usd = round(max(float(total_cost) - previous_cost, 0.0), 6)
        final = observed[-1]
        final["meta"] = {
            **final.get("meta", {}),
            "runtime": {
                "runtime": PROVIDER,
                "session_id": session_id,
                "resumed": resumed,
                **({"note": note} if note else {}),
                **({"end_reason": "max_wall_time"} if timed_out else {}),
            },
        }
        final["usage"] = usage.to_dict()
        stop_reason = (
            "stopped"
            if stopped
            else {"end_turn": "end_turn", "max_tokens": "max_tokens"}.get(result.get("stop_reason") or "", "other")
        )
        return ChatResult(
            message=final,
            usage=usage,
            stop_reason=stop_reason,
            provider_ids={
                "session_id": session_id,
                "resumed": resumed,
                "transcript_path": transcript,
                "session_cost_usd": total_cost if total_cost is not None else previous_cost,
                "num_turns": result.get("num_turns"),
            },
            observed=observed,
        )


def _assistant_blocks(observed: list[dict]) -> list[dict]:
    return [b for m in observed if m.get("role") == "assistant" for b in m.get("blocks", [])]
