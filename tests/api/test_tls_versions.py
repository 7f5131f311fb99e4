"""Relay speaks TLS 1.2 and 1.3 only: an older handshake is refused by the server."""

from __future__ import annotations

import socket
import ssl
from urllib.parse import urlsplit

import pytest

from tests.harness import RunningServer


def handshake(server: RunningServer, version: ssl.TLSVersion) -> str:
    """The protocol a client pinned to `version` agrees on with Relay."""
    address = urlsplit(server.base_url)
    context = server.tls_context()
    # The client must be willing to offer old versions, so that a refusal is the server's:
    # pinned so, it agrees on TLS 1.1 with a server that allows it.
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    context.minimum_version = version
    context.maximum_version = version
    assert address.hostname is not None
    assert address.port is not None
    with (
        socket.create_connection((address.hostname, address.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=address.hostname) as tls,
    ):
        agreed = tls.version()
    assert agreed is not None
    return agreed


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_tls_1_2_and_1_3_handshakes_succeed(server: RunningServer, version: ssl.TLSVersion) -> None:
    assert handshake(server, version) == {"TLSv1_2": "TLSv1.2", "TLSv1_3": "TLSv1.3"}[version.name]


# Pinning a client to these versions is deprecated by Python itself, which is the point.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_handshakes_older_than_tls_1_2_are_refused(
    server: RunningServer, version: ssl.TLSVersion
) -> None:
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        handshake(server, version)
