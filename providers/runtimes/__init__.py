"""Agent runtimes: coding-agent CLIs run as agent providers (providers/README.md, "Agent runtimes").

A native adapter returns one assistant message per call and the firing runs the tool calls in it. A runtime is
different: one firing step is one CLI run that does its own tool loop, so its adapter returns every message the run
produced (`ChatResult.observed`), the firing stores them all and runs none of their tool calls. What a runtime
needs from the firing (its session binding, the project's tools, its working area, its wall-clock limit) comes on
`ChatRequest.runtime` as a `RuntimeRun`, built by agents.services.runtime_runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..attachments import describe
from ..files import FileUnavailable, read_file_bytes
from ..types import ToolDefinition
from ..wire import text_of

ATTACHMENTS_DIR = "attachments"  # where a CLI runtime finds the conversation's files, under its working directory

# Exactly the rows of providers/README.md#fidelity: no label may imply we keep hidden state we do not keep.
FIDELITY = {
    "claude_code": "exact observable stream plus explicit session binding",
    "codex_cli": "observable-only, non-resumable",
    "vertex_agent": "exact observable events plus interaction/environment binding",
    "rlm": "observable-only, non-resumable",
}
# The native providers' rows, so every agent can say what its conversation keeps.
NATIVE_FIDELITY = {
    "openai": "provider-replayable Responses output and encrypted reasoning",
    "anthropic": "provider-replayable ordered blocks and signatures",
    "gemini": "provider-replayable generate_content parts and thought signatures",
    "openai_compatible": "provider-replayable only where capability verification passes; otherwise portable",
    "offline": "provider-replayable (the built-in offline provider keeps no state)",
}
FIDELITY_DETAIL = {
    "claude_code": (
        "Every streamed message is stored as observed. The Claude Code session id and where its transcript lives are "
        "kept on the conversation; the next firing resumes that session while its transcript exists on the worker, "
        "else starts a new one from a portable transcript of the stored conversation and says so."
    ),
    "codex_cli": (
        "Every event is stored as observed. Nothing of Codex's own state is kept: each firing is a new ephemeral run "
        "that receives the stored conversation as a portable transcript; its thread id is a label only."
    ),
    "vertex_agent": (
        "Every streamed event is stored as observed. Google keeps the interaction state server-side (store is on by "
        "default on their side) and the environment's files in its sandbox; we keep the events, and per stored "
        "point of the conversation the interaction id and the environment id. The next firing continues that "
        "interaction (previous_interaction_id) while the stored conversation is unchanged since it; a rewind "
        "continues from the interaction recorded at that point when there is one, else a new interaction starts "
        "from a portable transcript. The environment's files are not rewound."
    ),
    "rlm": (
        "Every iteration (the model's text, each REPL cell as a call with its output, sub-calls, tool calls) is "
        "stored as observed. The REPL's state dies with the sandboxed run: each firing is a new run that receives "
        "the stored conversation as a portable transcript."
    ),
}


def fidelity_of(provider: str) -> dict:
    """{"label", "detail"} of a provider's fidelity (providers/README.md#fidelity), for the API and the agent's form."""
    return {
        "label": FIDELITY.get(provider) or NATIVE_FIDELITY.get(provider) or "unknown provider",
        "detail": FIDELITY_DETAIL.get(provider, ""),
    }


@dataclass(frozen=True)
class RuntimeTool:
    """A project tool offered to the runtime (memory, todos): `call(arguments, call_id)` -> (content, is_error)."""

    definition: ToolDefinition
    call: Callable[[dict, str], tuple[str, bool]]


@dataclass
class RuntimeRun:
    home: Path  # this conversation's runtime directory (its config and transcripts live below it)
    # When the binding holds: {"session_id", "transcript_path", "session_cost_usd"} (Claude Code) or
    # {"interaction_id", "environment_id"} (Vertex).
    resume: dict | None = None
    tools: list[RuntimeTool] = field(default_factory=list)
    allowed_builtin_tools: list[str] = field(default_factory=list)  # the owner's allowlist; empty: none
    wall_seconds: float = 600.0
    # The runtime's own agent params (Vertex: project, location, agent, environment; RLM: backend and limits).
    params: dict = field(default_factory=dict)


def split_request(messages: list[dict]) -> tuple[str, list[dict], str]:
    """(system text, the conversation before the new message, the new user message's text)."""
    system = "\n\n".join(text_of(m) for m in messages if m.get("role") == "system" and text_of(m))
    rest = [m for m in messages if m.get("role") != "system"]
    if rest and rest[-1].get("role") == "user":
        return system, rest[:-1], text_of(rest[-1])
    return system, rest, ""


def files_of(messages: list[dict]) -> list[dict]:
    """The file blocks of the users' messages, in order, each distinct file (by hash) once."""
    seen: set[str] = set()
    out = []
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in message.get("blocks", []):
            if block.get("type") == "file" and block.get("sha256") not in seen:
                seen.add(block.get("sha256"))
                out.append(block)
    return out


def safe_file_name(name: str) -> str:
    """A file name that stays inside the directory it is written to: no path, no control characters, no leading
    dot, at most 100 characters (the extension kept)."""
    base = re.sub(r"[\x00-\x1f\x7f/\\:]", "_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip().lstrip(".")
    if not base or base in (".", ".."):
        base = "file"
    stem, dot, ext = base.rpartition(".")
    if len(base) > 100:
        base = f"{stem[: 100 - len(ext) - 1]}.{ext}" if dot and len(ext) < 16 else base[:100]
    return base


def attachment_paths(messages: list[dict]) -> dict[str, str]:
    """sha256 -> the path (relative to the working directory) each file of the conversation is written to. Stable
    while the conversation grows: names are given in order of first appearance, a clash gets a numbered suffix."""
    paths: dict[str, str] = {}
    taken: set[str] = set()
    for block in files_of(messages):
        name = safe_file_name(str(block.get("name") or "file"))
        candidate, number = name, 1
        while candidate.lower() in taken:
            number += 1
            stem, dot, ext = name.rpartition(".")
            candidate = f"{stem}-{number}.{ext}" if dot else f"{name}-{number}"
        taken.add(candidate.lower())
        paths[str(block["sha256"])] = f"{ATTACHMENTS_DIR}/{candidate}"
    return paths


def write_attachments(messages: list[dict], directory: Path) -> dict[str, str]:
    """Write every file of the conversation under `directory`/attachments/ (read-only); the paths written, by
    hash. A file no longer stored is skipped (the prompt says so)."""
    written: dict[str, str] = {}
    for sha256, relative in attachment_paths(messages).items():
        try:
            data = read_file_bytes(sha256)
        except FileUnavailable:
            continue
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o444)
        written[sha256] = relative
    return written


def file_line(block: dict, paths: dict[str, str] | None) -> str:
    where = (paths or {}).get(str(block.get("sha256")))
    if paths is None:
        return f"[file {describe(block)}]"
    if where is None:
        return f"[file {describe(block)}: no longer stored, not available]"
    return f"[file {describe(block)} at {where}]"


def attached_files_note(blocks: list[dict], paths: dict[str, str]) -> str:
    """What a CLI's prompt says about the new message's files: where each is in its working directory."""
    if not blocks:
        return ""
    lines = "\n".join(f"- {file_line(block, paths)}" for block in blocks)
    return f"\n\nAttached to this message (files in your working directory, read them as you need):\n{lines}"


def new_message_files(messages: list[dict]) -> list[dict]:
    """The file blocks of the new user message (the last message, when it is the user's)."""
    rest = [m for m in messages if m.get("role") != "system"]
    if rest and rest[-1].get("role") == "user":
        return [b for b in rest[-1].get("blocks", []) if b.get("type") == "file"]
    return []


def portable_transcript(messages: list[dict], paths: dict[str, str] | None = None) -> str:
    """The stored conversation as plain text any runtime can read: roles, text, tool calls and their results,
    the files attached (named, and where they are when `paths` says). Thinking is left out (it is the model's,
    signed for its own API)."""
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        for block in message.get("blocks", []):
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                lines.append(f"[{role}] {block['text']}")
            elif kind == "file":
                lines.append(f"[{role} attached] {file_line(block, paths)}")
            elif kind == "tool_call":
                lines.append(f"[assistant called {block.get('name')}] {block.get('arguments_raw', '')}")
            elif kind == "tool_result":
                marker = " (error)" if block.get("is_error") else ""
                lines.append(f"[result of {block.get('name')}{marker}] {block.get('content', '')}")
    return "\n".join(lines)


def handoff_prompt(
    history: list[dict], user_text: str, *, note: str | None = None, paths: dict[str, str] | None = None
) -> str:
    if not history:
        return user_text
    head = f"({note})\n\n" if note else ""
    transcript = portable_transcript(history, paths)
    return (
        f"{head}The conversation so far, from its stored record:\n<transcript>\n{transcript}\n"
        f"</transcript>\n\nThe new message:\n{user_text}"
    )
