"""Test settings: the same real PostgreSQL and Redis, quieter and faster password hashing."""

from .base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING["root"]["level"] = "WARNING"  # noqa: F405
# Tests read static files from the source folders (nothing is collected first).
STATIC_HASHED = False
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405

# No test trips a rate limit by accident; a test about throttling sets the rate it needs.
THROTTLE_RATES = {scope: "1000000/minute" for scope in THROTTLE_RATES}  # noqa: F405
