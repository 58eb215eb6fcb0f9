"""The embedded services are locked to this machine's user: PostgreSQL wants the generated password (no trust
logins), Redis wants its password, the data folder and the password files are private; a folder made by an
earlier version (trust, no Redis password) is converted when it is next used, running or stopped."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import psycopg
import pytest
import redis as redis_client
from django.conf import settings

from tests.processes import REPO_ROOT

pytestmark = pytest.mark.slow


def _run(code: str, data_dir) -> list[str]:
    env = {**os.environ, "OPENCOMPANY_DATA_DIR": str(data_dir), "OPENCOMPANY_QUIET_EMBEDDED": "1"}
    out = subprocess.run(
        [sys.executable, "-c", f"from core import embedded as e; {code}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def _refuses_without_password(port: int) -> None:
    for host in ("127.0.0.1", "::1"):
        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", connect_timeout=5).close()
        message = str(refused.value)
        assert "password" in message or "Connection refused" in message, message


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_test_databases_postgres_refuses_a_password_less_login():
    """The server these very tests run on (the embedded default)."""
    database = settings.DATABASES["default"]
    assert database["PASSWORD"]
    _refuses_without_password(int(database["PORT"]))
    with pytest.raises(redis_client.AuthenticationError):
        redis_client.Redis(host="127.0.0.1", port=int(settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0])).ping()


def test_a_fresh_folder_is_private_and_password_protected(services_path):
    data_dir = services_path / "data"
    try:
        pg_url, redis_url = _run("print(e.ensure_postgres()); print(e.ensure_redis())", data_dir)
        port = json.loads((data_dir / "postgres.json").read_text())["port"]
        _refuses_without_password(port)
        psycopg.connect(pg_url).execute("select 1")
        redis_port = json.loads((data_dir / "redis.json").read_text())["port"]
        with pytest.raises((redis_client.AuthenticationError, redis_client.ResponseError)):
            redis_client.Redis(host="127.0.0.1", port=redis_port).set("k", "v")
        assert redis_client.Redis.from_url(redis_url).ping()

        assert _mode(data_dir) in (0o700, 0o710)
        assert _mode(data_dir) & 0o007 == 0  # nothing for other users
        assert _mode(data_dir / "redis") == 0o700
        for name in ("postgres.password", "redis.password", "redis/redis.conf"):
            assert _mode(data_dir / name) == 0o600, name
        assert "trust" not in (data_dir / "postgres" / "pg_hba.conf").read_text().split("scram-sha-256", 1)[1]
        # The Redis password is in its 0600 config file, not on a command line other users can read.
        redis_pid = int((data_dir / "redis" / "redis.pid").read_text())
        assert (data_dir / "redis.password").read_text().strip() not in " ".join(
            open(f"/proc/{redis_pid}/cmdline").read().split("\0")
        )
    finally:
        _run("e.stop_all()", data_dir)


def test_a_folder_from_an_earlier_version_is_converted(services_path):
    """Make a folder the old way (trust logins, no passwords), both running and stopped, and use it."""
    data_dir = services_path / "data"
    try:
        _run("e.ensure_postgres(); e.ensure_redis()", data_dir)
        port = json.loads((data_dir / "postgres.json").read_text())["port"]
        redis_port = json.loads((data_dir / "redis.json").read_text())["port"]
        old_password = (data_dir / "postgres.password").read_text().strip()
        # Turn it into an earlier version's folder: trust in pg_hba.conf, no password files, Redis without one.
        with psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", password=old_password, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute("ALTER ROLE postgres PASSWORD NULL")
            (data_dir / "postgres" / "pg_hba.conf").write_text(
                "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"
            )
            conn.execute("SELECT pg_reload_conf()")
        redis_password = (data_dir / "redis.password").read_text().strip()
        redis_client.Redis(host="127.0.0.1", port=redis_port, password=redis_password).config_set("requirepass", "")
        (data_dir / "postgres.password").unlink()
        (data_dir / "redis.password").unlink()
        (data_dir / "redis" / "redis.conf").unlink()
        psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres").close()  # trust: open

        # Running: converted through the live servers.
        pg_url, redis_url = _run("print(e.ensure_postgres()); print(e.ensure_redis())", data_dir)
        _refuses_without_password(port)
        psycopg.connect(pg_url).execute("select 1")
        assert redis_client.Redis.from_url(redis_url).ping()
        with pytest.raises((redis_client.AuthenticationError, redis_client.ResponseError)):
            redis_client.Redis(host="127.0.0.1", port=redis_port).set("k", "v")

        # Stopped: converted in single-user mode before the server starts.
        _run("e.stop_all()", data_dir)
        (data_dir / "postgres" / "pg_hba.conf").write_text("host all all 127.0.0.1/32 trust\n")
        (data_dir / "postgres.password").unlink()
        pg_url = _run("print(e.ensure_postgres())", data_dir)[0]
        port = json.loads((data_dir / "postgres.json").read_text())["port"]
        _refuses_without_password(port)
        psycopg.connect(pg_url).execute("select 1")
    finally:
        _run("e.stop_all()", data_dir)
