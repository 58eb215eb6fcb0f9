"""The client's address, the one thing every per-address limit counts by.

`X-Forwarded-For` is written by whoever sends the request, so only the entries the operator's own proxies appended
can be believed: with `TRUSTED_PROXY_COUNT` = N (the proxies in front of the web process, docs/deploy.md) the
client is the N-th entry from the right; with 0 (the default) the header is ignored and the address is
`REMOTE_ADDR`, the peer of the connection. (Daphne's `--proxy-headers` takes the leftmost entry, which the client
chose: it must not be used.)
"""

from __future__ import annotations

import ipaddress

from django.conf import settings


def client_address(meta: dict) -> str:
    """The client's address from a request's META (`request.META`, Django's or DRF's request alike)."""
    remote = meta.get("REMOTE_ADDR") or ""
    count = settings.TRUSTED_PROXY_COUNT
    forwarded = meta.get("HTTP_X_FORWARDED_FOR") if count > 0 else None
    if not forwarded:
        return remote
    entries = [entry.strip() for entry in forwarded.split(",") if entry.strip()]
    if not entries:
        return remote
    # Fewer entries than proxies: the request skipped the outer ones; the leftmost is what the first proxy it
    # reached saw (a client-written entry would make the list longer, not shorter).
    candidate = entries[-min(count, len(entries))]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        # Our proxies write addresses; anything else is not an address to count by.
        return remote
