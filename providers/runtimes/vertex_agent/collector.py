"""The interactions' stream events as MessageWire, as they arrive (steps keyed by their index), the project's
function calls answered through the tool contract, and the step's result when the firing ends."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor

from ...adapters.common import estimated_usage
from ...types import ChatRequest, ChatResult, Usage
from ...wire import text_block, tool_call_block, tool_result_message
from .params import PROVIDER, VertexParams

logger = logging.getLogger("providers.vertex_agent")

# Statuses an interaction can end a stream with, and what the firing makes of them.
_DONE = {"completed": "end_turn", "incomplete": "max_tokens", "budget_exceeded": "max_tokens"}


def _result_text(result) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in result):
        return "".join(p.get("text", "") for p in result)
    return json.dumps(result, ensure_ascii=False)


class Collector:
    """Turns the interactions' stream events into MessageWire as they arrive (steps keyed by their index)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.observed: list[dict] = []
        self.interaction_ids: list[str] = []
        self.interaction_id: str | None = None
        self.environment_id: str | None = None
        self.status: str | None = None
        self.error: str | None = None
        self.usage: dict[str, int] = {}
        self.usage_seen = False
        self.call_names: dict[str, str] = {}
        self._steps: dict[int, dict] = {}
        self._calls: list[dict] = []  # function calls of the current interaction, in order

    def begin(self) -> None:
        self.status = None
        self.error = None
        self._steps = {}
        self._calls = []

    def _assistant(self) -> dict:
        last = self.observed[-1] if self.observed else None
        if last is None or last["role"] != "assistant":
            last = {"role": "assistant", "blocks": []}
            self.observed.append(last)
        return last

    def _snapshot(self, interaction: dict) -> None:
        if interaction.get("id"):
            self.interaction_id = interaction["id"]
            if interaction["id"] not in self.interaction_ids:
                self.interaction_ids.append(interaction["id"])
        if interaction.get("environment_id"):
            self.environment_id = interaction["environment_id"]

    def add(self, event: dict) -> None:
        kind = event.get("event_type")
        if kind == "interaction.created":
            self._snapshot(event.get("interaction") or {})
        elif kind == "interaction.completed":
            interaction = event.get("interaction") or {}
            self._snapshot(interaction)
            self.status = interaction.get("status") or "completed"
            self._add_usage(interaction.get("usage"))
        elif kind == "error":
            error = event.get("error") or {}
            self.error = f"{error.get('code') or 'error'}: {error.get('message') or 'the stream reported an error'}"
        elif kind == "step.start":
            self._start(int(event.get("index", 0)), event.get("step") or {})
        elif kind == "step.delta":
            self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "step.stop":
            self._stop(int(event.get("index", 0)))

    def _add_usage(self, usage: dict | None) -> None:
        if not usage:
            return
        self.usage_seen = True
        for name, value in usage.items():
            if isinstance(value, int):
                self.usage[name] = self.usage.get(name, 0) + value

    # --- steps ---

    def _start(self, index: int, step: dict) -> None:
        kind = step.get("type") or "unknown"
        entry = {"kind": kind, "step": step, "text": "", "arguments": "", "signature": step.get("signature")}
        self._steps[index] = entry
        if kind == "thought":
            self.stream.emit({"type": "thinking_start"})
            for part in step.get("summary") or []:
                entry["text"] += part.get("text", "") if isinstance(part, dict) else ""
        elif kind == "model_output":
            for part in step.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "text" and part.get("text"):
                    entry["text"] += part["text"]
                    self.stream.emit({"type": "text_delta", "text": part["text"]})
        elif kind == "function_call":
            self.stream.emit({"type": "tool_call_start", "id": step.get("id"), "name": step.get("name")})

    def _delta(self, index: int, delta: dict) -> None:
        entry = self._steps.get(index)
        if entry is None:
            entry = {"kind": "model_output", "step": {"type": "model_output"}, "text": "", "arguments": ""}
            entry["signature"] = None
            self._steps[index] = entry
        kind = delta.get("type")
        if kind == "text":
            entry["text"] += delta.get("text", "")
            if entry["kind"] == "model_output":
                self.stream.emit({"type": "text_delta", "text": delta.get("text", "")})
        elif kind == "thought_summary":
            content = delta.get("content") or {}
            entry["text"] += content.get("text", "") if isinstance(content, dict) else ""
        elif kind == "thought_signature":
            entry["signature"] = delta.get("signature") or entry.get("signature")
        elif kind == "arguments_delta":
            entry["arguments"] += delta.get("arguments") or ""
            self.stream.emit(
                {"type": "tool_call_delta", "id": entry["step"].get("id"), "delta": delta.get("arguments")}
            )
        else:
            entry.setdefault("deltas", []).append(delta)  # other delta kinds are kept with their step, as observed

    def _stop(self, index: int) -> None:
        entry = self._steps.pop(index, None)
        if entry is not None:
            self._close(entry, stopped=False)

    def _close(self, entry: dict, *, stopped: bool) -> None:
        kind, step = entry["kind"], entry["step"]
        if kind == "thought":
            self.stream.emit({"type": "thinking_end"})
            if stopped and not entry.get("signature"):
                return  # a thought without its signature is not kept (the providers' rule for a stopped stream)
            block = {
                "type": "thinking",
                "text": entry["text"],
                "signature": entry.get("signature"),
                "provider": PROVIDER,
            }
            self._assistant()["blocks"].append(block)
        elif kind == "model_output":
            if entry["text"] or not stopped:
                self._assistant()["blocks"].append(text_block(entry["text"], stopped=stopped))
            others = [p for p in step.get("content") or [] if isinstance(p, dict) and p.get("type") != "text"]
            for part in others:
                self._assistant()["blocks"].append({"type": "vertex_content", "content": part})
        elif kind == "function_call":
            if stopped:
                return  # a half-received call is not kept
            raw = entry["arguments"] or json.dumps(step.get("arguments") or {})
            call_id = str(step.get("id") or f"call-{len(self.call_names) + 1}")
            name = str(step.get("name") or "")
            self.call_names[call_id] = name
            block = tool_call_block(id=call_id, name=name, arguments_raw=raw)
            self._assistant()["blocks"].append(block)
            self._calls.append(block)
        elif kind == "user_input" or kind == "function_result":
            return  # our own input, echoed
        elif kind.endswith("_call") and step.get("id"):
            if stopped:
                return
            # A tool the agent ran on Google's side (code execution, search, URL context, MCP...): a call whose
            # result step follows; neither is run here.
            call_id = str(step["id"])
            name = str(step.get("name") or kind.removesuffix("_call"))
            self.call_names[call_id] = name
            arguments = step.get("arguments")
            raw = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
            block = tool_call_block(id=call_id, name=name, arguments_raw=raw)
            block["vertex_step"] = kind
            self._assistant()["blocks"].append(block)
        elif kind.endswith("_result") and step.get("call_id") in self.call_names:
            if stopped:
                return
            call_id = str(step["call_id"])
            message = tool_result_message(
                tool_call_id=call_id,
                name=self.call_names[call_id],
                content=_result_text(step.get("result")),
                is_error=bool(step.get("is_error")),
            )
            message["blocks"][0]["vertex_step"] = kind
            self.observed.append(message)
        else:
            # A step this version does not model: kept whole, under its own type.
            self._assistant()["blocks"].append({"type": f"vertex_{kind}", "step": step})

    # --- function calls answered here ---

    def pending_calls(self) -> list[dict]:
        return list(self._calls)

    def answer(self, call: dict, by_name: dict) -> dict:
        # Shown as a step while it runs, like a native tool call (chat/observer.py).
        step = {"id": call["id"], "name": call["name"], "arguments": call.get("arguments")}
        self.stream.emit({"type": "runtime_step", "phase": "started", "tool_call": step, "result": None})
        tool = by_name.get(call["name"])
        if tool is None:
            content, is_error = f"There is no tool named {call['name']!r}.", True
        elif call.get("arguments") is None:
            content, is_error = f"The arguments were not a JSON object: {call.get('parse_error')}", True
        else:
            try:
                # On a thread of its own, as the seam expects: the tool opens (and closes) its own connection.
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vertex-tool") as pool:
                    content, is_error = pool.submit(tool.call, call["arguments"], call["id"]).result()
            except Exception as exc:  # a tool's own failure is the model's to see, not the firing's to die of
                logger.exception("vertex project tool failed", extra={"tool": call["name"]})
                content, is_error = f"The tool failed: {type(exc).__name__}", True
        self.observed.append(
            tool_result_message(tool_call_id=call["id"], name=call["name"], content=content, is_error=is_error)
        )
        outcome = {"is_error": is_error, "content": content}
        self.stream.emit({"type": "runtime_step", "phase": "finished", "tool_call": step, "result": outcome})
        result = {"type": "function_result", "call_id": call["id"], "name": call["name"], "result": content}
        if is_error:
            result["is_error"] = True
        return result

    # --- the result ---

    def finish(
        self,
        request: ChatRequest,
        *,
        continued_from: str | None,
        note: str | None,
        stopped: bool,
        timed_out: bool,
        params: VertexParams,
    ) -> ChatResult:
        if stopped:
            for index in sorted(self._steps):
                self._close(self._steps[index], stopped=True)
            self._steps = {}
            answered = {m["blocks"][0]["tool_call_id"] for m in self.observed if m["role"] == "tool"}
            for message in list(self.observed):
                for block in message["blocks"]:
                    if block.get("type") == "tool_call" and block["id"] not in answered:
                        self.observed.append(
                            tool_result_message(
                                tool_call_id=block["id"],
                                name=block["name"],
                                content="No result observed: the run was stopped before this tool answered.",
                                is_error=True,
                            )
                        )
                        answered.add(block["id"])
        observed = self.observed
        if (
            not observed
            or observed[-1]["role"] != "assistant"
            or any(b.get("type") == "tool_call" for b in observed[-1]["blocks"])
        ):
            observed.append({"role": "assistant", "blocks": [text_block("", stopped=True)] if stopped else []})
        raw = self.usage
        if self.usage_seen:
            usage = Usage(
                # Tool-use prompt tokens are input the agent's tools added; thought tokens are output.
                input_tokens=int(raw.get("total_input_tokens", 0)) + int(raw.get("total_tool_use_tokens", 0)),
                cached_tokens=int(raw.get("total_cached_tokens", 0)),
                output_tokens=int(raw.get("total_output_tokens", 0)) + int(raw.get("total_thought_tokens", 0)),
                reasoning_tokens=int(raw.get("total_thought_tokens", 0)),
            )
        else:
            usage = estimated_usage(request, [b for m in observed for b in m["blocks"]])
        final = observed[-1]
        runtime = {
            "runtime": PROVIDER,
            "agent": params.agent,
            "interaction_id": self.interaction_id,
            "environment_id": self.environment_id,
            "continued_from": continued_from,
        }
        if len(self.interaction_ids) > 1:
            runtime["interaction_ids"] = list(self.interaction_ids)
        if note:
            runtime["note"] = note
        if timed_out:
            runtime["end_reason"] = "max_wall_time"
        final["meta"] = {**final.get("meta", {}), "runtime": runtime}
        final["usage"] = usage.to_dict()
        stop_reason = "stopped" if stopped else _DONE.get(self.status or "", "other")
        if self.status == "requires_action" and not stopped:
            stop_reason = "other"  # a function round limit or the deadline ended it
        return ChatResult(
            message=final,
            usage=usage,
            stop_reason=stop_reason,
            provider_ids={
                "interaction_id": self.interaction_id,
                "environment_id": self.environment_id,
                "interaction_ids": list(self.interaction_ids),
                "status": self.status,
            },
            observed=observed,
        )
