"""What the Claude Code CLI is started with (its working area, environment, tools and options) and how it ends:
killed on purpose by Stop or the deadline, then waited for until its process group is gone."""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
import time
from pathlib import Path

import claude_agent_sdk
from claude_agent_sdk import create_sdk_mcp_server, tool

from ... import config
from ...types import ChatRequest
from .. import RuntimeRun
from ..process import clean_env_launcher, group_alive, kill_group
from .session import PROVIDER, Session

MCP_SERVER = "project"
logger = logging.getLogger("providers.claude_code")


class ExpectedExit(logging.Filter):
    """When Stop or the wall-clock limit kills the CLI, the SDK's message reader sees the process die and logs
    "Fatal error in message reader" at ERROR. That exit is what we asked for: on the run threads whose CLI we
    killed on purpose, the SDK's (and its event loop's) ERROR records become DEBUG ones. Any other thread's error
    stays an error."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.thread in self.threads:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            record.msg = f"(expected: the run was stopped) {record.msg}"
        return True

    def expect(self, thread_id: int | None) -> None:
        if thread_id is not None:
            with self.lock:
                self.threads.add(thread_id)

    def forget(self, thread_id: int | None) -> None:
        with self.lock:
            self.threads.discard(thread_id)


expected_exit = ExpectedExit()
for _name in ("claude_agent_sdk._internal.query", "claude_agent_sdk._internal.transport.subprocess_cli", "asyncio"):
    logging.getLogger(_name).addFilter(expected_exit)


def _bundled_cli() -> str:
    return str(Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")


def _mcp_server(run: RuntimeRun):
    tools = []
    for item in run.tools:

        def make(item=item):
            counter = {"n": 0}

            async def handler(arguments: dict) -> dict:
                counter["n"] += 1
                # Project tools touch the database: run them on a thread of their own, off this event loop.
                call_id = f"{item.definition.name}-{counter['n']}"
                content, is_error = await asyncio.to_thread(item.call, arguments, call_id)
                return {"content": [{"type": "text", "text": content}], "is_error": is_error}

            return tool(item.definition.name, item.definition.description, item.definition.parameters)(handler)

        tools.append(make())
    return create_sdk_mcp_server(MCP_SERVER, tools=tools) if tools else None


def prepare_launch(request: ChatRequest, run: RuntimeRun, system: str, session: Session) -> tuple[dict, Path]:
    """Empty the run's working directory, write the clean-environment launcher and return the SDK's options
    (as keyword arguments) with the control directory where the CLI's process group is recorded."""
    home = Path(run.home)
    cwd = home / "cwd"
    shutil.rmtree(cwd, ignore_errors=True)  # throwaway: nothing of an earlier run is left for this one to read
    cwd.mkdir(parents=True)
    control = home / "proc"
    control.mkdir(parents=True, exist_ok=True)
    (control / "pid").unlink(missing_ok=True)
    config_dir = home / "config"
    config_dir.mkdir(parents=True, exist_ok=True)
    api_key = config.api_key_for(PROVIDER, request.api_key) or "missing-api-key"
    base_url = config.base_url_for(PROVIDER, request.base_url)
    env = {
        "ANTHROPIC_API_KEY": api_key,
        "CLAUDE_CONFIG_DIR": str(config_dir),
        # A project tool may take as long as the run has left: one that asks the owner first waits for the decision
        # on the bridge (docs/tools.md#approvals), and the CLI must not give up on the call before the run does.
        "MCP_TOOL_TIMEOUT": str(int(max(run.wall_seconds, 1.0) * 1000)),
    }
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    launcher = clean_env_launcher(
        control,
        _bundled_cli(),
        names=[
            *env,
            "CLAUDE_CODE_ENTRYPOINT",
            "CLAUDE_AGENT_SDK_VERSION",
            "CLAUDE_AGENT_SDK_CLIENT_APP",
            "CLAUDE_AGENT_SDK_DERIVED_CLIENT_APP",
            "CLAUDE_CODE_SDK_READS_SESSION_STATE",
            "PWD",
        ],
        fixed={
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
    )
    server = _mcp_server(run)
    project_tools = [f"mcp__{MCP_SERVER}__{t.definition.name}" for t in run.tools]
    options = {
        "model": request.model,
        "system_prompt": system or None,
        "tools": list(run.allowed_builtin_tools),
        "allowed_tools": [*run.allowed_builtin_tools, *project_tools],
        "setting_sources": [],
        "cwd": str(cwd),
        "cli_path": str(launcher),
        "env": env,
        "include_partial_messages": True,
        "mcp_servers": {MCP_SERVER: server} if server else {},
        "strict_mcp_config": True,
        "stderr": lambda line: logger.debug("claude code: %s", line),
    }
    if session.resumed:
        options["resume"] = session.session_id
    else:
        options["session_id"] = session.session_id
    return options, control


def kill_on_purpose(control: Path, thread_id: int | None) -> None:
    expected_exit.expect(thread_id)  # the SDK's reader on that thread will see the process die: that is no error
    kill_group(control)


def wait_gone(control: Path) -> None:
    for _ in range(100):
        if not group_alive(control):
            return
        time.sleep(0.05)
    kill_group(control)
