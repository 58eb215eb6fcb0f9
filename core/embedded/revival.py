"""Noticing an embedded server that died or is shutting down, and starting it again (`dev.py run` asks every few
seconds).

A PostgreSQL in a smart shutdown refuses new connections while the sessions it has keep working, so a pooled web
process looks healthy on a half-stopped server; the postmaster's pid file says `stopping` then. Such a server is
stopped the fast way (the sessions holding the smart shutdown open are ended) and started again on its port, so
processes that hold its URL reconnect. A server whose process is gone (or that no longer answers on its port) is
started again the same way `ensure_postgres()` / `ensure_redis()` start one.
"""

from __future__ import annotations

from .common import data_dir, pid_alive, port_answers, read_state, secret_file
from .postgres_server import ensure_postgres, stop_postgres
from .redis_server import _redis_ping, ensure_redis

# postmaster.pid line 8 (PostgreSQL 10+): starting, stopping, ready, standby.
_PM_STATUS_LINE = 7


def postgres_problem() -> str | None:
    """What is wrong with the embedded PostgreSQL of this data folder ("died", "is shutting down", ...), or None
    when it runs (or was never set up here)."""
    root = data_dir()
    pgdata = root / "postgres"
    if not (pgdata / "PG_VERSION").exists():
        return None
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return "is not running"
    try:
        lines = pid_file.read_text().splitlines()
    except FileNotFoundError:  # it stopped while we looked
        return "is not running"
    pid = int(lines[0]) if lines and lines[0].strip().isdigit() else 0
    if not pid or not pid_alive(pid):
        return "died"
    if len(lines) > _PM_STATUS_LINE and lines[_PM_STATUS_LINE].strip() == "stopping":
        return "is shutting down"
    port = read_state(root / "postgres.json").get("port")
    if not port or not port_answers(port):
        return "does not answer"
    return None


def redis_problem() -> str | None:
    root = data_dir()
    if not (root / "redis.json").exists():
        return None
    port = read_state(root / "redis.json").get("port")
    if not port or not _redis_ping(port, secret_file(root / "redis.password")):
        return "does not answer"
    return None


def revive(*, postgres: bool = True, redis: bool = True) -> list[str]:
    """Start again whichever embedded server needs it; returns one line per server it restarted."""
    said: list[str] = []
    if postgres and (problem := postgres_problem()):
        if problem == "is shutting down":
            stop_postgres()
        ensure_postgres()
        port = read_state(data_dir() / "postgres.json").get("port")
        said.append(f"Embedded PostgreSQL {problem}: started it again on 127.0.0.1:{port}.")
    if redis and (problem := redis_problem()):
        ensure_redis()
        port = read_state(data_dir() / "redis.json").get("port")
        said.append(f"Embedded Redis {problem}: started it again on 127.0.0.1:{port}.")
    return said
