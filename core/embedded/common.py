"""What both embedded servers share: the private data folder, generated passwords, the lock file that serialises
a check-and-start, the state file that keeps a port, and the checks for a live port or pid."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


PG_SYSTEM_USER = "embedded_postgres"  # PostgreSQL refuses to run as root.


class EmbeddedServiceError(RuntimeError):
    pass


def data_dir() -> Path:
    path = Path(os.environ.get("OPENCOMPANY_DATA_DIR") or REPO_ROOT / ".data").resolve()
    path.mkdir(parents=True, exist_ok=True)
    make_private(path)
    return path


def make_private(path: Path) -> None:
    """Owner only. As root, PostgreSQL runs as PG_SYSTEM_USER and must traverse this folder to its own: that
    user's group may pass through (x), but not list it; everyone else gets nothing."""
    mode = 0o710 if os.geteuid() == 0 else 0o700
    with contextlib.suppress(OSError):
        if path.stat().st_mode & 0o777 != mode:
            path.chmod(mode)
    if os.geteuid() == 0:
        import pwd

        with contextlib.suppress(KeyError, OSError):
            group = pwd.getpwnam(PG_SYSTEM_USER).pw_gid
            if path.stat().st_gid != group:
                os.chown(path, 0, group)


def secret_file(path: Path) -> str:
    """A generated password kept in a 0600 file: read it, or make it the first time."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32))  # URL-safe: it goes into connection URLs unescaped
    if path.stat().st_mode & 0o777 != 0o600:
        path.chmod(0o600)
    return path.read_text().strip()


@contextlib.contextmanager
def file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_state(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def port_answers(port: int, timeout: float = 0.3) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout):
        return True
    return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pid_alive(pid: int) -> bool:
    """True for a running process; a zombie (killed, not yet reaped by its parent) counts as gone."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def say(message: str) -> None:
    if os.environ.get("OPENCOMPANY_QUIET_EMBEDDED") != "1":
        print(message, file=sys.stderr, flush=True)
