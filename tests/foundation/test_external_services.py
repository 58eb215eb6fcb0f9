"""With DATABASE_URL / REDIS_URL set the project uses those servers and starts nothing itself."""

import os
import subprocess
import sys

import psycopg
import pytest

from tests.processes import REPO_ROOT

pytestmark = pytest.mark.slow


def _python(code: str, env: dict) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, check=True, capture_output=True, text=True, timeout=180
    ).stdout.strip()


def test_external_urls_are_used_and_nothing_embedded_starts(services_path):
    base_env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    external_dir = services_path / "external"
    # Stand-ins for managed servers: the embedded engines, started by hand in another folder.
    start = "from core import embedded as e; print(e.ensure_postgres()); print(e.ensure_redis())"
    pg_url, redis_url = _python(start, {**base_env, "OPENCOMPANY_DATA_DIR": str(external_dir)}).splitlines()[-2:]
    app_dir = services_path / "app"
    env = {
        **base_env,
        "OPENCOMPANY_DATA_DIR": str(app_dir),
        "DATABASE_URL": pg_url,
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "opencompany.settings.base",
    }
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--no-input"],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
        shown = _python(
            "import django; django.setup(); from django.conf import settings; "
            "print(settings.DATABASES['default']['PORT'], settings.REDIS_URL)",
            env,
        )
        assert shown.split()[-2] == pg_url.rsplit(":", 1)[1].split("/")[0]
        assert shown.split()[-1] == redis_url
        assert not (app_dir / "postgres").exists() and not (app_dir / "redis").exists()
        assert not (app_dir / "postgres.json").exists() and not (app_dir / "redis.json").exists()
        with psycopg.connect(pg_url) as conn:
            applied = conn.execute("select count(*) from django_migrations where app = 'workflows'").fetchone()[0]
        assert applied >= 1
    finally:
        _python(
            "from core import embedded as e; e.stop_all()",
            {**base_env, "OPENCOMPANY_DATA_DIR": str(external_dir)},
        )
