"""Server-side request forgery guard for outbound URLs an owner controls (their OpenAI-compatible base URL).

A URL is accepted when its scheme is https (http only where `allow_http` says so) and every address its host
resolves to is public: not loopback, private, link-local, shared (CGNAT), multicast, reserved, unspecified or a
cloud metadata address, in IPv4 and IPv6 (IPv4-mapped and 6to4 forms unwrapped). A host on the staff allowlist
skips the address check (an internal vLLM server the operator vouches for) and may use http. The check runs when
the URL is saved and again on every request made with it, redirects included (`request_hook`), so a DNS answer
that changed since saving, or a redirect to an internal address, is refused too.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from .errors import ProviderError

METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    ipaddress.ip_address("192.0.0.192"),  # Oracle Cloud
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
}
SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")


class UnsafeURLError(ProviderError):
    """The URL may not be used: the message tells the owner why (never which internal service answered)."""

    code = "unsafe_base_url"


Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({info[4][0] for info in infos})


def _forbidden(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        if inner is not None:
            return _forbidden(inner)
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_unspecified:
        return "a reserved address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if isinstance(address, ipaddress.IPv4Address) and address in SHARED_ADDRESS_SPACE:
        return "a shared (carrier-grade NAT) address"
    if address.is_private:
        return "a private address"
    if address.is_multicast or address.is_reserved or address.is_unspecified:
        return "a reserved address"
    return None


def _host_key(host: str, port: int | None) -> set[str]:
    host = host.lower().strip("[]")
    return {host, f"{host}:{port}"} if port else {host}


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
    allowlisted = bool(_host_key(host, port) & {h.strip().lower() for h in allowed_hosts if h.strip()})
    if allowlisted:
        return url.strip()
    try:
        literal = ipaddress.ip_address(host)
        addresses = [str(literal)]
    except ValueError:
        try:
            addresses = resolver(host, port or (443 if parts.scheme == "https" else 80))
        except OSError:
            raise UnsafeURLError(f"The host {host} of the {what} could not be resolved.") from None
    if not addresses:
        raise UnsafeURLError(f"The host {host} of the {what} could not be resolved.")
    for raw in addresses:
        reason = _forbidden(ipaddress.ip_address(raw.split("%", 1)[0]))
        if reason:
            raise UnsafeURLError(
                f"The {what} points to {reason} ({host}), which owners may not reach from this server. {allow_hint}"
            )
    # After the address check, so an internal address is named as such whatever its scheme.
    if parts.scheme == "http" and not allow_http:
        raise UnsafeURLError(f"The {what} must use https:// (plain http is not allowed on this installation).")
    return url.strip()


def request_hook(
    *, allowed_hosts: Iterable[str], allow_http: bool, resolver: Resolver = resolve
) -> Callable[[object], None]:
    """An HTTP client request hook that re-checks every request's URL, redirects included."""
    hosts = tuple(allowed_hosts)

    def hook(request) -> None:
        check_outbound_url(str(request.url), allowed_hosts=hosts, allow_http=allow_http, resolver=resolver)

    return hook
