"""Test settings: the same real PostgreSQL and Redis, quieter and faster password hashing.

Under pytest-xdist (`dev.py test` runs the suite in parallel) each test process has its own database, made by
pytest-django (`test_<name>_gw0`, ...), and its own Redis database number, chosen here before the base settings read
REDIS_URL: the broker's queues, the cache's throttle counters and the channel layer's groups of one process are
never seen by another. Workers and web servers a test starts get the same URL (tests/processes.py).
"""

import os
from urllib.parse import urlsplit, urlunsplit

from core import embedded
from core.env import env_str


def _redis_database(url: str, number: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{number}"))


_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker.startswith("gw"):
    # Database 0 stays the one a serial run uses; Redis has 16 (databases 1-15 for up to 15 test processes).
    os.environ["REDIS_URL"] = _redis_database(
        env_str("REDIS_URL") or embedded.ensure_redis(), 1 + int(_xdist_worker.removeprefix("gw"))
    )

from .base import *  # noqa: E402, F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING["root"]["level"] = "WARNING"  # noqa: F405
# Tests read static files from the source folders (nothing is collected first).
STATIC_HASHED = False
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405

# No test trips a rate limit by accident; a test about throttling sets the rate it needs.
THROTTLE_RATES = {scope: "1000000/minute" for scope in THROTTLE_RATES}  # noqa: F405
