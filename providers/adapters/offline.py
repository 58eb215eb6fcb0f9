"""The offline provider: built in, no network, deterministic. See providers/README.md for its commands."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime
from io import BytesIO

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from .. import config
from ..files import FileUnavailable, read_file_bytes
from ..token_estimate import estimate_tokens
from ..types import ChatRequest, ChatResult, Usage
from ..wire import text_block, text_of, tool_call_block
from .common import Stream

PROVIDER = "offline"
CHUNK_WORDS = 3
RESULT_MENTION_CHARS = 300

COMMAND = re.compile(r"^\s*(remember|recall|todo)\s*:\s*(.+?)\s*$", re.IGNORECASE)
ASK = re.compile(r"^\s*ask\s+([A-Za-z0-9_.-]+)\s*:\s*(.+?)\s*$", re.IGNORECASE)
# `call <tool>: <json arguments>`: any offered tool (an MCP server's), the arguments sent as written.
CALL = re.compile(r"^\s*call\s+([A-Za-z0-9_-]{1,64})\s*:\s*(.*?)\s*$", re.IGNORECASE)
# A note OpenCompany puts ahead of the owner's message (chat/services/notes.py): `[kind]{json}[/kind]`.
NOTE_LINE = re.compile(r"^\[([a-z_]+)\]\{.*\}\[/\1\]$")


def _log_call(model: str) -> None:
    """Crash tests count provider calls across processes: one line per call, durable before we answer."""
    path = os.environ.get("OPENCOMPANY_OFFLINE_CALL_LOG") or config.setting("OPENCOMPANY_OFFLINE_CALL_LOG")
    if not path:
        return
    line = f"{model} {datetime.now(UTC).isoformat()} pid={os.getpid()}\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def _commands(text: str, tools: dict[str, str]) -> tuple[list[tuple[str, dict | str]], list[str]]:
    """(tool calls to make, notes about commands that name a tool the request does not offer)."""
    calls: list[tuple[str, dict | str]] = []
    notes: list[str] = []
    for line in text.splitlines():
        match = COMMAND.match(line)
        if match:
            verb, value = match.group(1).lower(), match.group(2)
            if verb == "remember":
                name, arguments = "memory", {"operation": "remember", "content": value}
            elif verb == "recall":
                name, arguments = "memory", {"operation": "recall", "query": value}
            else:
                name, arguments = "todos", {"operation": "add", "text": value}
        elif match := CALL.match(line):
            name, arguments = match.group(1), match.group(2) or "{}"  # raw: malformed JSON reaches the tool as is
        else:
            match = ASK.match(line)
            if not match:
                continue
            name, arguments = match.group(1), {"task": match.group(2)}
        actual = tools.get(name.lower())
        if actual is None:
            notes.append(f"I have no {name} tool.")
        else:
            calls.append((actual, arguments))
    return calls, notes


def _split_notes(text: str) -> tuple[list[str], str]:
    """(kinds of the notes at the top of a user message, the owner's own words). A real model reads the notes; the
    offline one only counts them, so it never echoes OpenCompany's bookkeeping back as if the owner had said it."""
    lines = text.split("\n")
    kinds = []
    index = 0
    while index < len(lines):
        match = NOTE_LINE.match(lines[index].strip())
        if not match:
            break
        kinds.append(match.group(1))
        index += 1
    if not kinds:
        return [], text
    return kinds, "\n".join(lines[index:]).lstrip("\n")


def _notes_mention(kinds: list[str]) -> str:
    if not kinds:
        return ""
    noun = "note" if len(kinds) == 1 else "notes"
    return f"({len(kinds)} {noun} from OpenCompany: {', '.join(dict.fromkeys(kinds))}.) "


def _result_sentence(name: str, content: str, is_error: bool) -> str:
    """One plain sentence about a tool result: what a person would say, not the JSON."""
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return f"The {name} tool refused: {data['error'].get('message') or data['error'].get('code')}"
    if is_error:
        return f"The {name} tool failed: {_clip(content)}"
    if isinstance(data, dict) and isinstance(data.get("item"), dict):
        item = data["item"]
        what = item.get("title") or item.get("content") or ""
        return f"Saved to memory as #{item.get('id')} (version {item.get('version')}): {_clip(what)}"
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        items = data["items"]
        if not items:
            return "Nothing in memory matched."
        found = "; ".join(_clip(str((i or {}).get("content") or (i or {}).get("title") or ""), 80) for i in items[:3])
        noun = "memory" if len(items) == 1 else "memories"
        more = f" and {len(items) - 3} more" if len(items) > 3 else ""
        return f"I found {len(items)} {noun}: {found}{more}."
    if isinstance(data, dict) and isinstance(data.get("forgotten"), dict):
        return f"Forgot memory #{data['forgotten'].get('id')}."
    if data is not None:
        return f"The {name} tool answered."
    return f"{name} answered: {_clip(content)}"


def _clip(text: str, limit: int = RESULT_MENTION_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


def _results_reply(messages: list[dict]) -> str:
    results = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        for block in message.get("blocks", []):
            if block.get("type") == "tool_result":
                results.append(block)
    results.reverse()
    sentences = [
        _result_sentence(str(b.get("name") or "tool"), str(b.get("content", "")), bool(b.get("is_error")))
        for b in results
    ]
    return "Done. " + " ".join(s if s.endswith((".", "…", "!", "?")) else s + "." for s in sentences)


def _summary_reply(text: str) -> str:
    from ..summarize import TRANSCRIPT_MARKER

    transcript = text.split(TRANSCRIPT_MARKER, 1)[-1].strip().splitlines()
    lines = [line[:200] for line in transcript if line.strip()]
    kept = lines[-20:]
    head = f"Offline summary of {len(lines)} transcript lines"
    return head + (":\n" + "\n".join(f"- {line}" for line in kept) if kept else ".")


def plan_reply(request: ChatRequest) -> tuple[str, list[tuple[str, dict | str]]]:
    """What the offline model answers to `request`: (text, tool calls). Pure and deterministic."""
    from ..summarize import TRANSCRIPT_MARKER

    messages = request.messages
    if messages and messages[-1].get("role") == "tool":
        return _results_reply(messages), []
    last_user_index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
    said = text_of(messages[last_user_index]) if last_user_index is not None else ""
    if TRANSCRIPT_MARKER in said:
        return _summary_reply(said), []
    note_kinds, said = _split_notes(said)
    heard = _notes_mention(note_kinds) + _files_mention(
        messages[last_user_index] if last_user_index is not None else None
    )
    tools = {tool.name.lower(): tool.name for tool in request.tools}
    calls, notes = _commands(said, tools)
    if calls:
        names = ", ".join(dict.fromkeys(name for name, _ in calls))
        return heard + " ".join([*notes, f"Calling {names}."]), calls
    if notes:
        return heard + " ".join(notes), []
    earlier = sum(1 for m in messages[: last_user_index or 0] if m.get("role") != "system")
    noun = "message" if earlier == 1 else "messages"
    return f"{heard}I see {earlier} earlier {noun}. You said: {said}", []


def _kilobytes(size: int) -> str:
    return f"{max(1, round(size / 1024))} KB"


def _pdf_pages(sha256: str) -> int | None:
    try:
        return len(PdfReader(BytesIO(read_file_bytes(sha256))).pages)
    except (FileUnavailable, PyPdfError, ValueError, OSError):
        return None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _files_mention(message: dict | None) -> str:
    """What the offline model says it received with the message: "I received 1 image, 34 KB; 1 PDF, 2 pages." (a
    real model reads the files; this one counts them, so tests and owners see what reached it)."""
    files = [b for b in (message or {}).get("blocks", []) if b.get("type") == "file"]
    if not files:
        return ""
    images = [f for f in files if str(f.get("media_type", "")).startswith("image/")]
    pdfs = [f for f in files if f.get("media_type") == "application/pdf"]
    others = [f for f in files if f not in images and f not in pdfs]
    parts = []
    if images:
        parts.append(f"{_plural(len(images), 'image')}, {_kilobytes(sum(int(f.get('size') or 0) for f in images))}")
    if pdfs:
        pages = [_pdf_pages(str(f.get("sha256", ""))) for f in pdfs]
        counted = f", {_plural(sum(pages), 'page')}" if None not in pages else ", pages unknown"
        parts.append(f"{_plural(len(pdfs), 'PDF')}{counted}")
    if others:
        parts.append(f"{_plural(len(others), 'document')}, {_kilobytes(sum(int(f.get('size') or 0) for f in others))}")
    return f"I received {'; '.join(parts)}. "


def _chunks(text: str) -> list[str]:
    words = re.findall(r"\S+\s*", text) or [text]
    return ["".join(words[i : i + CHUNK_WORDS]) for i in range(0, len(words), CHUNK_WORDS)]


def chat(request: ChatRequest, stream: Stream) -> ChatResult:
    _log_call(request.model)
    delay = int(config.setting("OFFLINE_PROVIDER_DELAY_MS")) / 1000.0
    text, calls = plan_reply(request)
    sent = ""
    stopped = False
    for index, piece in enumerate(_chunks(text)):
        if index and delay:
            time.sleep(delay)
        if stream.stopped():
            stopped = True
            break
        sent += piece
        stream.emit({"type": "text_delta", "text": piece})
    blocks: list[dict] = []
    call_blocks: list[dict] = []
    if not stopped:
        blocks.append(text_block(text))
        turn = len(request.messages)
        for number, (name, arguments) in enumerate(calls):
            if delay:
                time.sleep(delay)
            if stream.stopped():
                stopped = True
                break
            call_id = f"offline_{turn}_{number}"
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
            stream.emit({"type": "tool_call_start", "id": call_id, "name": name})
            stream.emit({"type": "tool_call_delta", "id": call_id, "delta": raw})
            call_blocks.append(tool_call_block(id=call_id, name=name, arguments_raw=raw))
        blocks.extend(call_blocks)
    elif sent:
        blocks.append(text_block(sent, stopped=True))
    output_text = "".join(b.get("text", "") + b.get("arguments_raw", "") for b in blocks)
    usage = Usage(input_tokens=estimate_tokens(request), output_tokens=max(1, len(output_text) // 4) if blocks else 0)
    if stopped:
        stop_reason = "stopped"
    else:
        stop_reason = "tool_use" if call_blocks else "end_turn"
    message = {"role": "assistant", "blocks": blocks, "usage": usage.to_dict()}
    return ChatResult(message=message, usage=usage, stop_reason=stop_reason, provider_ids={"provider": PROVIDER})
