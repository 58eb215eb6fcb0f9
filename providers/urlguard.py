"""Server-side request forgery guard for outbound URLs an owner controls (their OpenAI-compatible base URL).

A URL is accepted when its scheme is https (http only where `allow_http` says so) and every address its host
resolves to is public: not loopback, private, link-local, shared (CGNAT), multicast, reserved, unspecified or a
cloud metadata address, in IPv4 and IPv6 (IPv4-mapped and 6to4 forms unwrapped). A host on the staff allowlist
skips the address check (an internal vLLM server the operator vouches for) and may use http. The check runs when
the URL is saved and again on every request made with it, redirects included (`request_hook`), so a DNS answer
that changed since saving, or a redirect to an internal address, is refused too. And every connection made with
it goes only to an address vetted in the lookup made for that connection (`guarded_client`, core/outbound.py), so
a name that answers one address to the check and another to the connection (DNS rebinding) reaches nothing
internal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import httpx2

from core.outbound import Resolver, address_problem, addresses_of, guarded_http_client, resolve

from .errors import ProviderError


class UnsafeURLError(ProviderError):
    """The URL may not be used: the message tells the owner why (never which internal service answered)."""

    code = "unsafe_base_url"


def _host_key(host: str, port: int | None) -> set[str]:
    host = host.lower().strip("[]")
    return {host, f"{host}:{port}"} if port else {host}


def _allowlisted(host: str, port: int | None, allowed_hosts: Iterable[str]) -> bool:
    return bool(_host_key(host, port) & {h.strip().lower() for h in allowed_hosts if h.strip()})


def check_outbound_url(
    url: str,
    *,
    allowed_hosts: Iterable[str] = (),
    allow_http: bool = False,
    resolver: Resolver = resolve,
    what: str = "base URL",
    allow_hint: str = (
        "If it is a server you run (a local Ollama or vLLM, say), the operator can allow its host with the "
        "PROVIDER_BASE_URL_ALLOWED_HOSTS setting (or under Allowed provider hosts in the admin); plain http:// also "
        "needs PROVIDER_BASE_URL_ALLOW_HTTP."
    ),
) -> str:
    """Return the URL when it may be used, else raise UnsafeURLError with the reason. `what` names the URL in the
    messages (an owner's base URL, an MCP server's URL); `allow_hint` says how a host gets allowed."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise UnsafeURLError(f"The {what} is not a valid URL.") from None
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise UnsafeURLError(f"The {what} must start with https:// and name a host.")
    if parts.username or parts.password:
        raise UnsafeURLError(f"The {what} may not contain a user name or password; store the key separately.")
    if _allowlisted(host, port, allowed_hosts):
        return url.strip()
    try:
        addresses = addresses_of(host, port or (443 if parts.scheme == "https" else 80), resolver)
    except OSError:
        raise UnsafeURLError(f"The host {host} of the {what} could not be resolved.") from None
    _refuse_internal(host, addresses, what=what, allow_hint=allow_hint)
    # After the address check, so an internal address is named as such whatever its scheme.
    if parts.scheme == "http" and not allow_http:
        raise UnsafeURLError(f"The {what} must use https:// (plain http is not allowed on this installation).")
    return url.strip()


def _refuse_internal(host: str, addresses: list[str], *, what: str = "base URL", allow_hint: str = "") -> None:
    if not addresses:
        raise UnsafeURLError(f"The host {host} of the {what} could not be resolved.")
    for raw in addresses:
        reason = address_problem(raw)
        if reason:
            raise UnsafeURLError(
                f"The {what} points to {reason} ({host}), which owners may not reach from this server. {allow_hint}"
            )


def guarded_client(
    *, allowed_hosts: Iterable[str], allow_http: bool, timeout: httpx2.Timeout, resolver: Resolver | None = None
) -> httpx2.Client:
    """The HTTP client for an owner's base URL (core/outbound.py): each request's URL is checked (scheme, user
    info, redirects), and each connection goes only to an address this policy vetted in the same lookup, so a
    name that answers differently to the check and to the connection (DNS rebinding) reaches nothing internal."""
    hosts = tuple(allowed_hosts)

    def vet(host: str, port: int, addresses: list[str]) -> None:
        if not _allowlisted(host, port, hosts):
            _refuse_internal(host, addresses)

    hook = request_hook(allowed_hosts=hosts, allow_http=allow_http, resolver=resolver or resolve)
    return guarded_http_client(vet=vet, timeout=timeout, resolver=resolver, event_hooks={"request": [hook]})


def request_hook(
    *, allowed_hosts: Iterable[str], allow_http: bool, resolver: Resolver = resolve
) -> Callable[[object], None]:
    """An HTTP client request hook that re-checks every request's URL, redirects included."""
    hosts = tuple(allowed_hosts)

    def hook(request) -> None:
        check_outbound_url(str(request.url), allowed_hosts=hosts, allow_http=allow_http, resolver=resolver)

    return hook
