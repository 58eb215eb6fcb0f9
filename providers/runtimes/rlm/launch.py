"""What one RLM run is given and how its child starts: the agent's options (AgentParams rlm_*), the sandbox's own
limits (settings RLM_SANDBOX_*), the job sent to the child, and the child's process (its own process group and,
where the OS allows, its own user, network and PID namespaces, with an environment holding no key)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

from ... import config
from ...errors import NetworkError
from ...types import ChatRequest
from .. import RuntimeRun, RuntimeTool, attached_files_note, handoff_prompt
from ..process import die_with_parent

PROVIDER = "rlm"
BACKENDS = ("openai", "openai_compatible")
# The child: a directory run by path (`python -I -B <dir>` runs its __main__.py with that directory on sys.path).
SCRIPT = Path(__file__).with_name("sandbox")
# Per-agent options (AgentParams rlm_*) and their defaults; settings RLM_SANDBOX_* give the sandbox's own limits.
DEFAULTS = {
    "backend": "openai",
    "max_iterations": 10,
    "timeout_seconds": 300,
    "max_depth": 1,
    "max_llm_calls": 50,
}
SANDBOX_DEFAULTS = {
    "RLM_SANDBOX_CPU_SECONDS": 0,  # 0: the run's wall clock plus 5 s
    "RLM_SANDBOX_MEMORY_MB": 1024,
    "RLM_SANDBOX_OPEN_FILES": 128,
    "RLM_SANDBOX_FILE_MB": 64,
}
ROOT_PROMPT_CHARS = 4000  # a longer new message is left to `context` only


def _setting(name: str) -> int:
    return int(config.setting(name, SANDBOX_DEFAULTS[name]))


@functools.cache
def network_namespace_prefix() -> tuple[str, ...]:
    """argv prefix that starts the child in new user, network and PID namespaces (no root needed): an empty network
    with only a loopback, and a PID namespace whose init is the child, so whatever it forks (even into a session of
    its own) dies with it. () where the OS refuses (no unprivileged user namespaces): then the audit hook is the
    network guard and the process group kill the only reaper."""
    argv = ("/usr/bin/unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--")
    if not os.path.exists(argv[0]):
        return ()
    try:
        ok = subprocess.run([*argv, "/bin/true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return argv if ok else ()


def options_of(run: RuntimeRun | None) -> dict:
    options = dict(DEFAULTS)
    options.update({k: v for k, v in ((run.params if run is not None else None) or {}).items() if v is not None})
    if options["backend"] not in BACKENDS:
        options["backend"] = "openai"
    return options


def wall_seconds_of(run: RuntimeRun | None, options: dict) -> float:
    wall = float(options["timeout_seconds"])
    if run is not None:
        wall = min(wall, run.wall_seconds)
    return max(wall, 1.0)


def _tool_doc(tool: RuntimeTool) -> str:
    schema = json.dumps(tool.definition.parameters, ensure_ascii=False)
    name = tool.definition.name
    return (
        f"{tool.definition.description} Call it as `{name}(**arguments)`, the arguments matching this JSON schema: "
        f"{schema}. It returns the tool's answer as a string."
    )


def job_for(
    request: ChatRequest,
    *,
    options: dict,
    workdir: Path,
    wall: float,
    system: str,
    history: list[dict],
    user_text: str,
    tools: dict[str, RuntimeTool],
    files: tuple[list[dict], dict[str, str]] = ([], {}),
) -> dict:
    """The one line the child reads on its stdin before it starts: what to run and within which limits. `files`:
    the new message's file blocks and the absolute path of each written file, by hash."""
    new_files, paths = files
    note = attached_files_note(new_files, paths).replace("in your working directory", "at these paths")
    user_text = user_text + note
    return {
        "workdir": str(workdir),
        "model": request.model,
        "system": system,
        # The RLM's `context`: the stored conversation as a portable transcript, then the new message.
        "context": handoff_prompt(history, user_text, paths=paths),
        # What the model reads before it looks at `context`: the new message, unless it is long (then it is only
        # in `context`, which is the point of an RLM).
        "root_prompt": user_text
        if len(user_text) <= ROOT_PROMPT_CHARS
        else (f"The owner's new message ({len(user_text)} characters) is at the end of `context`; read it there."),
        "max_iterations": int(options["max_iterations"]),
        "max_depth": int(options["max_depth"]),
        "timeout": wall,
        "tools": {name: _tool_doc(tool) for name, tool in tools.items()},
        "limits": {
            # CPU seconds a little above the wall clock: the wall clock is the limit that speaks first, the CPU
            # limit catches a child the parent could no longer kill.
            "cpu_seconds": min(int(wall) + 5, _setting("RLM_SANDBOX_CPU_SECONDS") or int(wall) + 5),
            "memory_bytes": _setting("RLM_SANDBOX_MEMORY_MB") * 1024 * 1024,
            "open_files": _setting("RLM_SANDBOX_OPEN_FILES"),
            "file_bytes": _setting("RLM_SANDBOX_FILE_MB") * 1024 * 1024,
            "core_bytes": 0,
        },
    }


def start_sandbox(workdir: Path) -> tuple[subprocess.Popen, int]:
    """Start the child in `workdir`; returns it and the read end of its channel (the child writes to the fd that
    its last argument names)."""
    read_end, write_end = os.pipe()
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(workdir),
        "TMPDIR": str(workdir / "tmp"),
    }
    argv = [*die_with_parent(), *network_namespace_prefix(), sys.executable, "-I", "-B", str(SCRIPT)]
    argv.append(str(write_end))
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(workdir),
            pass_fds=(write_end,),
            start_new_session=True,  # its own process group: Stop kills it and anything it started
        )
    except OSError as exc:
        os.close(read_end)
        os.close(write_end)
        raise NetworkError(f"RLM sandbox could not start: {exc}", provider=PROVIDER) from exc
    os.close(write_end)
    return process, read_end
