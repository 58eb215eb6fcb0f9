"""A worker process keeps the stdio servers it started (mcp_nodes/stdio.py): a second call reuses the child, two
concurrent calls never share one, an idle child is ended, a dead or hung one is replaced (the call in flight gets a
clear error), and children end with their worker."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from mcp_nodes.client import McpFailure, call_tool
from mcp_nodes.stdio import stdio_pool
from tests.processes import ManagedProcess, child_env
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db

STDIO_SERVER = Path(__file__).with_name("stdio_server.py")
POOL_PROCESS = Path(__file__).with_name("pool_process.py")
REPORTER = {"argv": [sys.executable, str(STDIO_SERVER)]}


@pytest.fixture
def reporter(settings):
    settings.MCP_STDIO_SERVERS = {"reporter": REPORTER}
    settings.MCP_STDIO_IDLE_SECONDS = 300
    stdio_pool.close_all()
    yield settings
    stdio_pool.close_all()


def _call(tool: str, timeout: int = 30, **arguments):
    connection = {"transport": "stdio", "server": "reporter", "url": "", "headers": [], "timeout_seconds": timeout}
    return call_tool(owner_id=None, connection=connection, tool=tool, arguments=arguments)


def _pid(**arguments) -> int:
    result = _call("pid", **arguments)
    assert not result.is_error, result
    return json.loads(result.content[0].text)["pid"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is ended too (its parent has not reaped it yet)
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_a_second_call_reuses_the_child(reporter):
    first = _pid()
    assert _pid() == first and _alive(first)


def test_two_concurrent_calls_never_share_a_child(reporter):
    pids: list[int] = []
    threads = [threading.Thread(target=lambda: pids.append(_pid(wait=1.0))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(pids) == 2 and pids[0] != pids[1]
    assert _pid() in pids  # both went back to the pool: the next call takes one of them


def test_an_idle_child_is_ended_and_the_next_call_starts_another(reporter):
    reporter.MCP_STDIO_IDLE_SECONDS = 1
    first = _pid()
    wait_until(lambda: not _alive(first), timeout=30, what="the idle child to end")
    assert _pid() != first


def test_no_pool_starts_a_child_per_call(reporter):
    reporter.MCP_STDIO_IDLE_SECONDS = 0
    first = _pid()
    assert _pid() != first
    wait_until(lambda: not _alive(first), timeout=10, what="the child to end with its call")


def test_a_child_killed_mid_call_is_a_clear_error_and_is_replaced(reporter, tmp_path):
    first = _pid()
    outcome: dict = {}
    mark = tmp_path / "hanging"

    def in_flight():
        try:
            outcome["result"] = _call("hang", seconds=20, mark=str(mark))
        except McpFailure as exc:
            outcome["error"] = exc

    caller = threading.Thread(target=in_flight)
    caller.start()
    wait_until(mark.exists, timeout=10, what="the call to reach the child")
    os.kill(first, signal.SIGKILL)
    caller.join(30)
    error = outcome.get("error")
    assert error is not None and error.code == "server_ended", outcome
    assert "'reporter' ended during the call" in error.message and "may have had effects" in error.message
    assert _pid() != first


def test_a_child_that_died_while_idle_is_replaced(reporter):
    first = _pid()
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not _alive(first), timeout=10, what="the child to die")
    assert _pid() != first


def test_a_hung_child_is_cut_off_and_replaced(reporter):
    first = _pid()
    with pytest.raises(McpFailure) as hung:
        _call("hang", timeout=1, seconds=30)
    assert hung.value.code == "timeout"
    wait_until(lambda: not _alive(first), timeout=15, what="the hung child to be ended")
    assert _pid() != first


@pytest.mark.parametrize("ending", ["exit", "killed"])
def test_children_end_with_their_worker(tmp_path, ending):
    env = child_env(MCP_STDIO_SERVERS=json.dumps({"reporter": REPORTER}), MCP_STDIO_IDLE_SECONDS="300")
    mode = "exit" if ending == "exit" else "wait"
    worker = ManagedProcess([sys.executable, str(POOL_PROCESS), mode], env, tmp_path / "pool.log")
    try:
        wait_until(lambda: "pid " in worker.log(), timeout=60, what="the pooled call")
        child = int(worker.log().split("pid ", 1)[1].split()[0])
        if ending == "killed":
            assert _alive(child)
            os.kill(worker.pid, signal.SIGKILL)  # the worker alone: the child is in a session of its own
        worker.process.wait(timeout=30)
        wait_until(lambda: not _alive(child), timeout=15, what="the child to end with its worker")
    finally:
        worker.stop()


def test_test_connection_ends_its_stdio_child_and_keeps_none_in_the_web_process(reporter):
    from mcp_nodes.client import list_tools

    connection = {"transport": "stdio", "server": "reporter", "url": "", "headers": [], "timeout_seconds": 30}
    assert "pid" in {t.name for t in list_tools(owner_id=None, connection=connection)}
    assert stdio_pool._sessions == set()
