"""The RLM child's reports as MessageWire and chat steps: one iteration is one assistant message (the model's text,
then each REPL cell as a `repl` tool call) and one tool message per cell; the step's result when the run ends."""

from __future__ import annotations

import json

from ...types import ChatResult, Usage
from ...wire import text_block, tool_call_block, tool_result_message
from .launch import PROVIDER

OUTPUT_CHARS = 20_000  # what a cell's output keeps (the child already cut longer ones)
TEXT_CHARS = 200_000  # what the model's text or a cell's code keeps in the stored conversation
STOPPED_CELL = "No result observed: the run was stopped before this cell finished."


def _step(stream, phase: str, call: dict, result: dict | None = None) -> None:
    # The chat shows each cell and each project tool call as a step while the run goes on (chat/observer.py).
    stream.emit({"type": "runtime_step", "phase": phase, "tool_call": call, "result": result})


class Collector:
    """Turns the child's reports into MessageWire and chat steps.

    One iteration = one assistant message (the model's text, then each REPL cell as a `repl` tool call), followed by
    one tool message per cell (its stdout and stderr, the project tool calls it made and its sub-calls).
    """

    def __init__(self, stream) -> None:
        self.stream = stream
        self.observed: list[dict] = []
        self.iterations = 0
        self.response: str | None = None  # the current iteration's model text, before its iteration report
        self.cells: list[dict] = []  # cells of the current iteration, as they start and end
        self.tool_calls: dict[str, dict] = {}
        self.tool_count = 0
        self.cell_count = 0  # ids are ours: the child's numbers only pair a cell's start with its end

    def model(self, response: str) -> None:
        self.response = response[:TEXT_CHARS]

    def code_start(self, event: dict) -> None:
        self.cell_count += 1
        code = str(event.get("code") or "")[:TEXT_CHARS]
        cell = {"id": f"rlm-cell-{self.cell_count}", "n": event.get("n"), "code": code, "tools": [], "ended": False}
        self.cells.append(cell)
        _step(
            self.stream,
            "started",
            {"id": cell["id"], "name": "repl", "arguments": {"code": cell["code"]}},
        )

    def code_end(self, event: dict) -> None:
        for cell in self.cells:
            if cell["n"] == event.get("n") and not cell["ended"]:
                cell.update(ended=True, stdout=str(event.get("stdout") or ""), stderr=str(event.get("stderr") or ""))
                content = _cell_output(cell)
                result = {"content": content, "is_error": bool(cell["stderr"].strip())}
                call = {"id": cell["id"], "name": "repl", "arguments": {"code": cell["code"]}}
                _step(self.stream, "finished", call, result)
                return

    def tool_start(self, name: str, arguments: dict) -> str:
        self.tool_count += 1
        call_id = f"rlm-tool-{self.tool_count}"
        entry = {"id": call_id, "name": name, "arguments": arguments, "content": None, "is_error": False}
        self.tool_calls[call_id] = entry
        open_cells = [c for c in self.cells if not c["ended"]]
        if open_cells:
            open_cells[-1]["tools"].append(entry)
        _step(self.stream, "started", {"id": call_id, "name": name, "arguments": arguments})
        return call_id

    def tool_done(self, event: dict) -> None:
        entry = self.tool_calls.get(str(event.get("call_id")))
        if entry is None or entry["content"] is not None:
            return
        entry.update(content=str(event.get("content") or ""), is_error=bool(event.get("is_error")))
        result = {"content": entry["content"], "is_error": entry["is_error"]}
        _step(
            self.stream, "finished", {"id": entry["id"], "name": entry["name"], "arguments": entry["arguments"]}, result
        )

    def iteration(self, event: dict) -> None:
        self.iterations += 1
        blocks = list(event.get("code_blocks") or [])
        # The iteration's cells are the last len(blocks) cells started; their tool calls came in while they ran.
        cells = self.cells[-len(blocks) :] if blocks else []
        for cell, block in zip(cells, blocks, strict=False):
            cell.update(
                ended=True,
                stdout=str(block.get("stdout") or ""),
                stderr=str(block.get("stderr") or ""),
                sub_calls=block.get("sub_calls") or [],
            )
        response = str(event.get("response") or "")[:TEXT_CHARS]
        self._append(response, cells, iteration=self.iterations)
        self.cells = []
        self.response = None

    def _append(self, response: str, cells: list[dict], *, iteration: int, stopped: bool = False) -> None:
        blocks = [text_block(response, stopped=stopped)] if response or stopped else []
        for cell in cells:
            arguments = json.dumps({"code": cell["code"]}, ensure_ascii=False)
            blocks.append(tool_call_block(id=cell["id"], name="repl", arguments_raw=arguments))
        self.observed.append({"role": "assistant", "blocks": blocks, "meta": {"rlm": {"iteration": iteration}}})
        for cell in cells:
            if cell.get("ended"):
                content, is_error = _cell_output(cell), bool(str(cell.get("stderr") or "").strip())
            else:
                content, is_error = STOPPED_CELL, True
            message = tool_result_message(tool_call_id=cell["id"], name="repl", content=content, is_error=is_error)
            observed = {
                "tool_calls": [
                    {k: t[k] for k in ("name", "arguments", "content", "is_error")} for t in cell.get("tools", [])
                ],
                "sub_calls": cell.get("sub_calls") or [],
            }
            message["blocks"][0]["observed"] = observed
            self.observed.append(message)

    def finish(
        self,
        *,
        final: str | None,
        failure: str | None,
        end_reason: str | None,
        usage: Usage,
        sandbox: dict,
        llm_calls: int,
        stopped: bool,
    ) -> ChatResult:
        if self.response is not None or self.cells:
            # The iteration in progress when the run ended: its model text and cells, as far as they went.
            self._append(self.response or "", self.cells, iteration=self.iterations + 1, stopped=True)
        if final is not None:
            answer = [text_block(final)]
        else:
            answer = [text_block(_ending_text(failure, end_reason), stopped=stopped)]
            if not stopped:
                self.stream.emit({"type": "text_delta", "text": answer[0]["text"]})
        if final is not None:
            self.stream.emit({"type": "text_delta", "text": final})
        runtime = {
            "runtime": PROVIDER,
            "resumed": False,
            "iterations": self.iterations,
            "backend_calls": llm_calls,
            "sandbox": sandbox,
        }
        if end_reason:
            runtime["end_reason"] = end_reason
        if failure:
            runtime["error"] = failure
        final_message = {"role": "assistant", "blocks": answer, "meta": {"runtime": runtime}, "usage": usage.to_dict()}
        self.observed.append(final_message)
        stop_reason = "stopped" if stopped else ("end_turn" if final is not None else "other")
        return ChatResult(
            message=final_message,
            usage=usage,
            stop_reason=stop_reason,
            provider_ids={"iterations": self.iterations, "backend_calls": llm_calls},
            observed=self.observed,
        )


def _ending_text(failure: str | None, end_reason: str | None) -> str:
    if end_reason == "stopped":
        return ""
    reasons = {
        "max_wall_time": "its wall-clock limit was reached",
        "cpu_limit": "its CPU time limit was reached",
    }
    if failure:
        return f"The RLM run ended without an answer: {failure}"
    why = reasons.get(end_reason or "", f"the sandbox ended it ({end_reason})")
    return f"The RLM run was stopped by its sandbox before it answered: {why}."


def _cell_output(cell: dict) -> str:
    parts = []
    stdout = str(cell.get("stdout") or "")
    stderr = str(cell.get("stderr") or "")
    if stdout:
        parts.append(stdout[:OUTPUT_CHARS])
    if stderr.strip():
        parts.append(f"[stderr]\n{stderr.strip(chr(10))[:OUTPUT_CHARS]}")  # rlm starts an exception's line with one
    for tool in cell.get("tools", []):
        marker = " (error)" if tool.get("is_error") else ""
        arguments = json.dumps(tool["arguments"], ensure_ascii=False)
        parts.append(f"[{tool['name']} {arguments}{marker}] {tool.get('content') or ''}")
    for call in cell.get("sub_calls") or []:
        kind = "rlm_query" if call.get("recursive") else "llm_query"
        parts.append(f"[{kind} {call.get('model')}] {str(call.get('response') or '')[:2000]}")
    return "\n".join(parts) if parts else "(no output)"
