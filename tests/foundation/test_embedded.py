"""Embedded services: a race of two starters, a stale pid from a killed run, a clean stop."""

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from tests.processes import REPO_ROOT

pytestmark = pytest.mark.slow

START = "from core import embedded as e; print(e.ensure_postgres()); print(e.ensure_redis())"


def _run(code: str, data_dir) -> list[str]:
    env = {**os.environ, "OPENCOMPANY_DATA_DIR": str(data_dir), "OPENCOMPANY_QUIET_EMBEDDED": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def _postmaster_pid(data_dir) -> int:
    return int((data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[0])


def test_two_racing_starters_share_one_server_and_a_killed_run_is_recovered(services_path):
    data_dir = services_path / "data"
    try:
        with ThreadPoolExecutor(2) as pool:
            first, second = pool.map(lambda _: _run(START, data_dir), range(2))
        assert first == second  # both processes got the same PostgreSQL and Redis
        pg_pid = _postmaster_pid(data_dir)
        redis_pid = int((data_dir / "redis" / "redis.pid").read_text())

        # A killed run leaves a postmaster.pid and a redis.pid behind.
        killed = [psutil.Process(pg_pid), psutil.Process(redis_pid)]
        for process in killed:
            process.send_signal(signal.SIGKILL)
        _, alive = psutil.wait_procs(killed, timeout=30)
        assert not alive, alive
        assert (data_dir / "postgres" / "postmaster.pid").exists()
        again = _run(START + "\nimport psycopg; psycopg.connect(e.ensure_postgres()).execute('select 1')", data_dir)
        assert _postmaster_pid(data_dir) != pg_pid
        assert json.loads((data_dir / "redis.json").read_text())["port"]
        assert len(again) == 2
    finally:
        _run("from core import embedded as e; e.stop_all()", data_dir)
    assert not (data_dir / "postgres" / "postmaster.pid").exists()
