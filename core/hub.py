"""The hub epoch tells clients when the realtime hub lost its memory (a Redis restart).

It is kept in Redis; when it is missing (Redis was flushed or restarted without data) a
new one is made, and a client seeing a new epoch refetches a snapshot instead of trusting
its event sequence.
"""

import secrets

from django.core.cache import cache

HUB_EPOCH_KEY = "opencompany:hub-epoch"


def hub_epoch() -> str:
    try:
        value = cache.get(HUB_EPOCH_KEY)
        if value is None:
            cache.add(HUB_EPOCH_KEY, secrets.token_hex(8), timeout=None)
            value = cache.get(HUB_EPOCH_KEY)
        return str(value)
    except Exception:
        return "unavailable"
