import socket

import pytest

from tests.network_guard import NetworkAccessError


def test_a_socket_to_a_non_loopback_address_fails():
    with pytest.raises(NetworkAccessError):
        socket.create_connection(("192.0.2.1", 80), timeout=0.1)


def test_resolving_a_public_name_fails():
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("api.openai.com", 443)
