"""One RLM firing step: a throwaway working directory, the sandboxed child started with its job, the run collected,
and the child and its directory gone before the step returns."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ...errors import NetworkError
from ...types import ChatRequest, ChatResult
from .. import RuntimeRun, new_message_files, split_request, write_attachments
from .launch import job_for, options_of, start_sandbox, wall_seconds_of
from .session import Session


def chat(request: ChatRequest, stream) -> ChatResult:
    run: RuntimeRun | None = request.runtime
    options = options_of(run)
    system, history, user_text = split_request(request.messages)
    base = Path(run.home) if run is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="rlm-run-", dir=base))  # throwaway, deleted after the run
    (workdir / "tmp").mkdir()
    # The conversation's files, as absolute paths its code may open (the REPL runs each cell in a directory of its
    # own below the working directory, which the sandbox lets it read).
    written = {sha: str(workdir / relative) for sha, relative in write_attachments(request.messages, workdir).items()}
    wall = wall_seconds_of(run, options)
    tools = {t.definition.name: t for t in (run.tools if run is not None else [])}
    job = job_for(
        request,
        options=options,
        workdir=workdir,
        wall=wall,
        system=system,
        history=history,
        user_text=user_text,
        tools=tools,
        files=(new_message_files(request.messages), written),
    )
    try:
        process, read_end = start_sandbox(workdir)
    except NetworkError:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    session = Session(request, stream, options, process, read_end, tools, wall)
    try:
        session.send(job)
        return session.collect()
    finally:
        session.kill()
        shutil.rmtree(workdir, ignore_errors=True)
