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

from .common import EmbeddedServiceError, data_dir, say
from .postgres_server import ensure_postgres, postgres_url, stop_postgres
from .redis_server import ensure_redis, redis_server_binary, redis_url, stop_redis

__all__ = [
    "EmbeddedServiceError",
    "data_dir",
    "ensure_postgres",
    "ensure_redis",
    "postgres_url",
    "redis_server_binary",
    "redis_url",
    "stop_all",
    "stop_postgres",
    "stop_redis",
]


def stop_all() -> None:
    """Both servers, Redis first (`dev.py stop`, Ctrl-C of `dev.py run`)."""
    stopped_redis = stop_redis()
    stopped_pg = stop_postgres()
    say(f"Stopped embedded services (postgres: {stopped_pg}, redis: {stopped_redis})")
