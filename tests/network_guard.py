"""No test may touch the network: only loopback sockets and names resolve (installed by tests/conftest.py)."""

from __future__ import annotations

import ipaddress
import socket


class NetworkAccessError(RuntimeError):
    pass


def _is_loopback(host) -> bool:
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
        raise NetworkAccessError(f"tests may only open sockets to 127.0.0.1/::1, not {address[0]!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
        raise NetworkAccessError(f"tests may only open sockets to 127.0.0.1/::1, not {address[0]!r}")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if host is not None and not _is_loopback(host) and host not in ("127.0.0.1", "::1"):
        raise NetworkAccessError(f"tests may not resolve {host!r}: there is no network but loopback")
    return _real_getaddrinfo(host, *args, **kwargs)


def guard_the_network() -> None:
    """From now on, a socket to anything but loopback fails the test that opened it."""
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex
    socket.getaddrinfo = _guarded_getaddrinfo
