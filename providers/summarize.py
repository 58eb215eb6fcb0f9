"""The summarizer compaction uses: one ChatUnifier call with a summarization instruction.

The turns to summarize are sent as a rendered transcript inside one user message rather than replayed as
messages: a summary request must not depend on tool definitions, thinking signatures or pairing rules of the
turns it summarizes, and it must work the same for every provider.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .attachments import reference
from .types import ChatRequest, ChatSettings, UrlPolicy, Usage
from .unifier import ChatUnifier
from .wire import text_message, text_of

SUMMARY_INSTRUCTION = (
    "Summarize the conversation transcript below for your own later use. Keep every fact, decision, preference, "
    "open task and tool result that still matters, with names, numbers and identifiers exact. Leave out "
    "pleasantries. Write the summary only, as plain text."
)
TRANSCRIPT_MARKER = "## Transcript to summarize"


def render_transcript(messages: list[dict]) -> str:
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        for block in message.get("blocks", []):
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                lines.append(f"{role}: {block['text']}")
            elif kind == "tool_call":
                lines.append(f"{role} called tool {block['name']} with {block.get('arguments_raw', '')}")
            elif kind == "tool_result":
                status = "failed" if block.get("is_error") else "returned"
                lines.append(f"tool {block['name']} {status}: {block.get('content', '')}")
            elif kind == "image":
                lines.append(f"{role}: [image {block.get('ref', '')}]")
            elif kind == "file":
                lines.append(f"{role} attached {reference(block)}")
            elif kind not in ("thinking", "redacted_thinking"):
                lines.append(f"{role}: {json.dumps(block)}")
    return "\n".join(lines)


FILES_KEPT_HEAD = (
    "Files attached in the summarized turns (named here only: they are no longer sent; ask the owner to attach one "
    "again to see it):"
)


def file_references(messages: list[dict]) -> str:
    """The references of every file attached in `messages`, each once, as a paragraph that ends a summary: the
    summary replaces those turns, and with them the file blocks, so their names and hashes stay in its text."""
    seen: set[str] = set()
    lines = []
    for message in messages:
        for block in message.get("blocks", []):
            if block.get("type") == "file" and block.get("sha256") not in seen:
                seen.add(block.get("sha256"))
                lines.append(f"- {reference(block)}")
    return f"{FILES_KEPT_HEAD}\n" + "\n".join(lines) if lines else ""


@dataclass
class Summary:
    text: str
    usage: Usage  # the call's real usage, billed to the ledger like any call


def summarize_call(
    *,
    provider: str,
    model: str,
    messages: list[dict],
    api_key: str | None = None,
    base_url: str | None = None,
    url_policy: UrlPolicy | None = None,
    runtime_params: dict | None = None,
) -> Summary:
    """Summary of `messages` (MessageWire dicts) with the call's usage. Raises ProviderError; the caller
    (compaction) treats that as terminal. The offline provider answers deterministically."""
    system = [m for m in messages if m.get("role") == "system"]
    prompt = f"{SUMMARY_INSTRUCTION}\n\n{TRANSCRIPT_MARKER}\n{render_transcript(messages)}"
    request = ChatRequest(
        provider=provider,
        model=model,
        messages=[*system, text_message("user", prompt)],
        tools=[],
        settings=ChatSettings(),
        api_key=api_key,
        base_url=base_url,
        url_policy=url_policy,
    )
    if runtime_params:
        # An agent runtime that needs its own params to run at all (a Vertex agent's project and agent): a
        # throwaway run that resumes and keeps nothing.
        import tempfile
        from pathlib import Path

        from .runtimes import RuntimeRun

        request.runtime = RuntimeRun(home=Path(tempfile.gettempdir()), params=dict(runtime_params))
    result = ChatUnifier().chat(request)
    text = text_of(result.message).strip()
    # Kept by us, not left to the model: a summary that forgot a file would lose the last trace of it.
    kept = file_references(messages)
    if kept and kept not in text:
        text = f"{text}\n\n{kept}" if text else kept
    return Summary(text=text, usage=result.usage)


class SummaryText(str):
    """The summary as a plain string that also carries the call's usage (`.usage`), so callers that only want the
    text keep working and the ledger can bill the call."""

    usage: Usage


def summarize(
    *,
    provider: str,
    model: str,
    messages: list[dict],
    api_key: str | None = None,
    base_url: str | None = None,
    url_policy: UrlPolicy | None = None,
    runtime_params: dict | None = None,
) -> str:
    """The summary text (a SummaryText carrying `.usage`); see summarize_call."""
    summary = summarize_call(
        provider=provider,
        model=model,
        messages=messages,
        api_key=api_key,
        base_url=base_url,
        url_policy=url_policy,
        runtime_params=runtime_params,
    )
    text = SummaryText(summary.text)
    text.usage = summary.usage
    return text
