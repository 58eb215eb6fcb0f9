"""Which Claude Code session a run continues: the bound one while its transcript is on this worker, else a new one
that starts from a portable transcript of the stored conversation."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

from .. import RuntimeRun, handoff_prompt

PROVIDER = "claude_code"
logger = logging.getLogger("providers.claude_code")


def _cwd_slug(path: Path) -> str:
    # Claude Code keeps a session under projects/<its cwd with every non-alphanumeric character as "-">.
    return "".join(c if c.isalnum() else "-" for c in str(path))


def transcript_path(home: Path, session_id: str) -> Path:
    return home / "config" / "projects" / _cwd_slug(home / "cwd") / f"{session_id}.jsonl"


@dataclass(frozen=True)
class Session:
    session_id: str
    resumed: bool
    prompt: str  # what the query sends: the new message, or the handoff prompt of a new session
    note: str | None  # said on the answer (`meta.runtime.note`) when a new session replaced or began the record
    previous_cost: float  # the resumed session's cumulative cost so far (this run bills the difference)


def session_for(run: RuntimeRun, history: list[dict], user_text: str, paths: dict[str, str] | None = None) -> Session:
    resume = run.resume
    if resume and Path(resume["transcript_path"]).is_file():
        cost = float(resume.get("session_cost_usd") or 0)
        return Session(resume["session_id"], True, user_text, None, cost)
    session_id = str(uuid.uuid4())
    note = None
    if resume:
        note = (
            f"The Claude Code session {resume['session_id']} could not be resumed: its transcript "
            f"({resume['transcript_path']}) is gone from this worker. A new session {session_id} started from a "
            "portable transcript of the stored conversation."
        )
        logger.warning("claude code transcript gone", extra={"session_id": resume["session_id"]})
    elif history:
        note = f"A new Claude Code session {session_id} started from a portable transcript of the stored record."
    prompt = handoff_prompt(history, user_text, note=note if resume else None, paths=paths)
    return Session(session_id, False, prompt, note, 0.0)
