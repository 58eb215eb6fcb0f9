"""One RLM firing step: a throwaway working directory, the sandboxed child started with its job, the run collected,
and the child and its directory gone before the step returns."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ...errors import NetworkError
from ...types import ChatRequest, ChatResult
from .. import RuntimeRun, split_request
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
