"""stdio MCP servers: the operator's commands, and the pool that keeps them running between calls.

A stdio server is a child of the worker process, started under resource limits without the worker's environment.
Starting one costs a process start and an initialize (for a Python server, a few hundred ms), so each worker process
keeps the servers it started in a pool, keyed by the operator's name for them:

- a pooled session is checked out by one call at a time (two concurrent calls get two children), and checked back in
  only when the call got an answer; a call that timed out, was stopped or failed at the transport leaves its child
  in a state nobody knows, so the child is ended;
- a child whose output ended (it died, or was killed) is replaced at check-out; a call in flight when it died gets a
  clear error (`server_ended`) and is never sent again; a hung child is cut off at its call's timeout and ended;
- a session idle for MCP_STDIO_IDLE_SECONDS is ended (0: no pool, a child per call);
- children end with their worker: at exit the pool ends them, and `setpriv --pdeathsig KILL` kills them if the
  worker dies without exiting (the signal follows the thread that started the child: the session's own thread, which
  lives as long as the session); a forked worker process starts with an empty pool of its own.

Each session runs its own event loop on a daemon thread (an anyio blocking portal); the calling thread waits for its
call's future and polls Stop meanwhile.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import shutil
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal
from django.conf import settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from .errors import McpFailure

STOP_POLL_SECONDS = 0.2
logger = logging.getLogger("mcp_nodes.stdio")
# How long check-out waits for a new child's initialize at most (the call's own timeout is shorter when it is).
START_TIMEOUT_SECONDS = 60.0


def stdio_parameters(name: str) -> StdioServerParameters:
    """The operator's entry for `name`, started under resource limits and killed with its worker. The SDK starts it
    with a default environment (PATH, HOME, USER and the like), never the worker's: no keys, no database URL."""
    entry = (settings.MCP_STDIO_SERVERS or {}).get(name)
    if not isinstance(entry, dict) or not entry.get("argv"):
        raise McpFailure("unknown_stdio_server", f"The stdio server {name!r} is not one this installation lists.")
    limits = [
        shutil.which("prlimit") or "/usr/bin/prlimit",
        f"--as={settings.MCP_STDIO_MEMORY_BYTES}",
        f"--cpu={settings.MCP_STDIO_CPU_SECONDS}",
        f"--nofile={settings.MCP_STDIO_OPEN_FILES}",
        "--",
    ]
    return StdioServerParameters(
        command=shutil.which("setpriv") or "/usr/bin/setpriv",
        args=["--pdeathsig", "KILL", "--", *limits, *[str(a) for a in entry["argv"]]],
        env={str(k): str(v) for k, v in (entry.get("env") or {}).items()},
        cwd=entry.get("cwd") or None,
    )


def ended_failure(name: str) -> McpFailure:
    return McpFailure(
        "server_ended",
        f"The stdio server {name!r} ended during the call (it may have had effects); a new one is started for the "
        "next call.",
    )


class _WatchedStream:
    """The transport's read stream, telling the session when the SDK stopped reading it: the child's output ended
    (it died) or the session is closing. Everything else is the stream's own."""

    def __init__(self, stream, on_end: Callable[[], None]):
        self._stream, self._on_end = stream, on_end

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    async def __aenter__(self):
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc):
        self._on_end()
        return await self._stream.__aexit__(*exc)

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self._stream.__anext__()
        except BaseException:
            self._on_end()
            raise


class PooledSession:
    """One stdio child and its initialized `mcp.Client`, on an event loop of its own."""

    def __init__(self, name: str, parameters: StdioServerParameters):
        self.name, self.parameters = name, parameters
        self.ended = threading.Event()  # the child's output ended, or the session was closed
        self.idle_since = time.monotonic()
        self.timer: threading.Timer | None = None
        self._portal: BlockingPortal | None = None
        self._client: Client | None = None
        self._ready = threading.Event()
        self._close_now: anyio.Event | None = None
        self._holder: concurrent.futures.Future | None = None
        self._errlog = open(os.devnull, "w")  # noqa: SIM115 (closed with the session)
        self.pid: int | None = None
        self._thread = threading.Thread(target=anyio.run, args=(self._loop,), daemon=True, name=f"mcp-stdio-{name}")

    async def _loop(self) -> None:
        async with BlockingPortal() as portal:
            self._portal = portal
            self._ready.set()
            await portal.sleep_until_stopped()

    async def _hold(self, started: threading.Event) -> None:
        """Enter the client, hand it over, and keep it (one task enters and exits it) until closing."""
        self._close_now = anyio.Event()

        @asynccontextmanager
        async def transport():
            async with stdio_client(self.parameters, errlog=self._errlog) as (read, write):
                yield _WatchedStream(read, self.ended.set), write

        async with Client(transport(), read_timeout_seconds=START_TIMEOUT_SECONDS, cache=None) as client:
            self._client = client
            started.set()
            await self._close_now.wait()

    def open(self, timeout: float) -> None:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_SECONDS):
            raise McpFailure("server_error", f"The stdio server {self.name!r} could not be started (no event loop).")
        started = threading.Event()
        self._holder = self._portal.start_task_soon(self._hold, started)
        deadline = time.monotonic() + timeout
        while not started.wait(0.01):
            if self._holder.done():
                self._holder.result()  # the start failed: raise why
                raise ended_failure(self.name)
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError()
        self.pid = self._spawned_pid()

    def _spawned_pid(self) -> int | None:
        """The child's pid: the one process this session's loop thread started (setpriv and prlimit exec the
        server, so the pid stays). None where /proc does not list a thread's children."""
        try:
            with open(f"/proc/self/task/{self._thread.native_id}/children") as children:
                pids = children.read().split()
        except OSError:
            return None
        return int(pids[0]) if len(pids) == 1 else None

    def child_gone(self) -> bool:
        """Whether the child has died, seen from the process table rather than its pipes: a child killed while idle
        is then replaced before a call is written to it, instead of failing that call as one that may have run."""
        if self.pid is None:
            return False
        try:
            with open(f"/proc/{self.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return True
        state, parent = fields[0], int(fields[1])
        return state in ("Z", "X") or parent != os.getpid()

    @property
    def alive(self) -> bool:
        return not self.ended.is_set()

    def run(self, operation: Callable[..., Awaitable[Any]], *, timeout: float, should_stop=None) -> Any:
        """`operation(client, cancelled: threading.Event)` on this session's loop, within `timeout`; this thread
        polls `should_stop` meanwhile (Stop sets `cancelled`, which the operation watches)."""
        cancelled = threading.Event()

        async def bounded():
            with anyio.fail_after(timeout):
                return await operation(self._client, cancelled)

        future = self._portal.start_task_soon(bounded)
        # Not `future.result(timeout=…)`: its TimeoutError is the builtin one, which the call's own timeout raises too.
        while not concurrent.futures.wait([future], timeout=STOP_POLL_SECONDS).done:
            if should_stop is not None and not cancelled.is_set() and should_stop():
                cancelled.set()
        return future.result()

    def call(self, function: Callable[[], Awaitable[Any]]) -> Any:
        return self._portal.call(function)

    def close(self) -> None:
        """End the child (the SDK closes its stdin, waits, then kills it) and the loop, without waiting for it."""
        self.ended.set()
        if self.timer is not None:
            self.timer.cancel()
        threading.Thread(target=self._shut, daemon=True, name=f"mcp-stdio-close-{self.name}").start()

    def _shut(self) -> None:
        portal = self._portal
        if portal is None:
            return
        try:
            if self._close_now is not None:
                portal.call(self._close_now.set)
            if self._holder is not None:
                concurrent.futures.wait([self._holder], timeout=10)
            portal.call(portal.stop, True)
        except Exception:  # noqa: BLE001
            logger.debug("stdio session of %s already gone", self.name)
        finally:
            self._errlog.close()

    def close_and_wait(self) -> None:
        self.ended.set()
        if self.timer is not None:
            self.timer.cancel()
        self._shut()


class StdioPool:
    """This worker process's stdio sessions: idle ones by server name, and every one it started."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle: dict[str, list[PooledSession]] = {}
        self._sessions: set[PooledSession] = set()

    def run(self, name: str, operation, *, timeout: float, should_stop=None) -> Any:
        """One operation on a session of the server `name` (checked out for it alone)."""
        parameters = stdio_parameters(name)
        session = self._check_out(name, parameters, timeout)
        answered = False
        try:
            result = session.run(operation, timeout=timeout, should_stop=should_stop)
            answered = True
            return result
        except BaseException:
            if session.ended.is_set():
                raise ended_failure(name) from None
            raise
        finally:
            self._check_in(session, healthy=answered)

    def _check_out(self, name: str, parameters: StdioServerParameters, timeout: float) -> PooledSession:
        while (session := self._idle_session(name, parameters)) is not None:
            if self._settled_alive(session):
                return session
            self._drop(session)  # died while idle (its end not seen yet): replaced
        session = PooledSession(name, parameters)
        with self._lock:
            self._sessions.add(session)
        try:
            session.open(min(timeout, START_TIMEOUT_SECONDS))
        except BaseException:
            self._drop(session)
            raise
        return session

    def _idle_session(self, name: str, parameters: StdioServerParameters) -> PooledSession | None:
        with self._lock:
            idle = self._idle.get(name, [])
            while idle:
                session = idle.pop()
                if session.timer is not None:
                    session.timer.cancel()
                if session.alive and session.parameters == parameters:
                    return session
                self._sessions.discard(session)
                session.close()  # dead, or the operator changed the server's entry
        return None

    @staticmethod
    def _settled_alive(session: PooledSession) -> bool:
        """Whether a reused child is still there: a child that died a moment ago is replaced instead of failing the
        call. Its state in the process table says so at once; without its pid, the loop first reads whatever the
        pipes say (its output's end, not read yet)."""

        async def settle() -> None:
            await anyio.sleep(0)  # one poll of the pipes
            await anyio.wait_all_tasks_blocked()  # the reader and the session have handled what it found

        if session.pid is not None:  # the process table answers at once; the pipes need not be polled
            return session.alive and not session.child_gone()
        try:
            session.call(settle)
        except Exception:  # noqa: BLE001 (its loop is gone)
            return False
        return session.alive

    def _drop(self, session: PooledSession) -> None:
        with self._lock:
            self._sessions.discard(session)
        session.close()

    def _check_in(self, session: PooledSession, *, healthy: bool) -> None:
        idle_seconds = settings.MCP_STDIO_IDLE_SECONDS
        if not healthy or not session.alive or idle_seconds <= 0:
            with self._lock:
                self._sessions.discard(session)
            session.close()
            return
        with self._lock:
            session.idle_since = time.monotonic()
            session.timer = threading.Timer(idle_seconds, self._expire, args=(session,))
            session.timer.daemon = True
            self._idle.setdefault(session.name, []).append(session)
        session.timer.start()

    def _expire(self, session: PooledSession) -> None:
        with self._lock:
            idle = self._idle.get(session.name, [])
            if session not in idle:
                return  # checked out meanwhile
            idle.remove(session)
            self._sessions.discard(session)
        session.close()

    def close_all(self) -> None:
        with self._lock:
            sessions = list(self._sessions)
            self._sessions.clear()
            self._idle.clear()
        for session in sessions:
            session.close_and_wait()

    def forget(self) -> None:
        """In a forked child: the parent's sessions (their threads and children) are not this process's."""
        self._lock = threading.Lock()
        self._idle, self._sessions = {}, set()


stdio_pool = StdioPool()
atexit.register(stdio_pool.close_all)
os.register_at_fork(after_in_child=stdio_pool.forget)
