"""Outbound HTTP to URLs an owner controls: the address policy and the one client that obeys it.

An owner's URL (an OpenAI-compatible base URL now, an MCP server's URL later) may reach only public addresses.
Checking the name and then letting the HTTP client resolve it again to connect leaves a gap: a name can answer a
public address to the check and an internal one to the connection (DNS rebinding). So the client made here
resolves each host once per connection, hands every address to the caller's `vet` (which raises to refuse), and
connects only to the addresses it vetted; TLS still verifies the certificate against the host name. Redirects go
through the same connections, so they are vetted too.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

import httpcore2
import httpx2

METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    ipaddress.ip_address("192.0.0.192"),  # Oracle Cloud
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
}
SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")

Resolver = Callable[[str, int], list[str]]
# vet(host, port, addresses) raises to refuse the connection; the addresses are the ones that will be tried.
Vet = Callable[[str, int, list[str]], None]


def resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({info[4][0] for info in infos})


def address_problem(raw: str) -> str | None:
    """Why an owner's URL may not reach this address ("a private address", ...), or None for a public one."""
    address = ipaddress.ip_address(raw.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        if inner is not None:
            return address_problem(str(inner))
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
    if address.is_multicast or address.is_reserved:
        return "a reserved address"
    return None


def addresses_of(host: str, port: int, resolver: Resolver | None = None) -> list[str]:
    """The addresses a host stands for: itself when it is an address, else one lookup's answer."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        return (resolver or resolve)(host, port)


class PinnedConnections(httpcore2.NetworkBackend):
    """Connects only to addresses the caller vetted, from one lookup made for that connection."""

    def __init__(self, *, vet: Vet, resolver: Resolver | None = None):
        self._vet = vet
        self._resolver = resolver
        self._backend = httpcore2.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = addresses_of(host, port, self._resolver)
        if not addresses:
            raise httpcore2.ConnectError(f"{host} has no address")
        self._vet(host, port, addresses)
        last_error: Exception | None = None
        for address in addresses:
            try:
                return self._backend.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError as error:
                last_error = error
        raise last_error

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore2.ConnectError("owner URLs reach TCP hosts only")

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def guarded_http_client(
    *,
    vet: Vet,
    timeout: httpx2.Timeout,
    resolver: Resolver | None = None,
    event_hooks: dict[str, Iterable[Callable]] | None = None,
) -> httpx2.Client:
    """An HTTP client (the httpx the provider SDKs take as `http_client`) for an owner's URL: every connection,
    redirects included, goes only to addresses `vet` accepted. No proxy from the environment: a proxy would do
    its own lookup, past the check."""
    transport = httpx2.HTTPTransport(trust_env=False)
    pool = transport._pool
    # httpx builds its connection pool without a way to pass a network backend; an upgrade that renames the field
    # must fail here, not quietly connect unvetted.
    if not (isinstance(pool, httpcore2.ConnectionPool) and hasattr(pool, "_network_backend")):
        raise RuntimeError("httpx2's transport no longer has the connection pool core/outbound.py pins")
    pool._network_backend = PinnedConnections(vet=vet, resolver=resolver)
    return httpx2.Client(
        transport=transport,
        timeout=timeout,
        follow_redirects=True,
        trust_env=False,
        event_hooks={key: list(hooks) for key, hooks in (event_hooks or {}).items()},
    )
