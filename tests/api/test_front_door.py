"""The front door, over real TLS sockets: a request head must arrive in time and
within its bound, smuggling shapes get one answer and a closed connection, and
connections that hold a slot without a request do not keep honest clients out."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.harness import RunningServer, ServerThread, test_settings

# The shortest header timeout Relay accepts: a closed connection shows within a test's time.
HEADER_TIMEOUT = 1.0
# A client waits this long for the server to act; the server acts well before.
PATIENCE = 15


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    data_dir: Path = tmp_path_factory.mktemp("front-door")
    settings = test_settings(data_dir, database_url, header_timeout=HEADER_TIMEOUT)
    with ServerThread(settings) as server:
        yield server


def address(server: RunningServer) -> tuple[str, int]:
    parts = urlsplit(server.base_url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


def connect(server: RunningServer) -> ssl.SSLSocket:
    raw = socket.create_connection(address(server), timeout=PATIENCE)
    return server.tls_context().wrap_socket(raw, server_hostname="localhost")


def send(tls: ssl.SSLSocket, data: bytes) -> None:
    """Send what the server takes; a server that refused may close before the rest."""
    with suppress(BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
        tls.sendall(data)


def read_until_closed(tls: ssl.SSLSocket) -> bytes:
    """Everything the server sends until it closes; a socket timeout fails the test."""
    received = b""
    while True:
        try:
            chunk = tls.recv(65536)
        except (ConnectionResetError, ssl.SSLEOFError):
            return received
        if not chunk:
            return received
        received += chunk


def statuses(received: bytes) -> list[int]:
    return [
        int(line.split(b" ")[1])
        for line in received.split(b"\r\n")
        if line.startswith(b"HTTP/1.1 ")
    ]


def test_a_request_head_that_stops_arriving_is_closed_unanswered(door: RunningServer) -> None:
    with connect(door) as tls:
        send(tls, b"POST /v1/verifications HT")
        assert read_until_closed(tls) == b""


def test_a_connection_that_sends_nothing_after_its_handshake_is_closed(
    door: RunningServer,
) -> None:
    with connect(door) as tls:
        assert read_until_closed(tls) == b""


def test_a_kept_alive_connection_with_no_next_request_is_closed(door: RunningServer) -> None:
    with connect(door) as tls:
        send(tls, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert statuses(read_until_closed(tls)) == [200]


def head_with(header_bytes: int) -> bytes:
    return (
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        + b"X-Padding: "
        + b"a" * header_bytes
        + b"\r\n\r\n"
    )


@pytest.mark.parametrize("size", [64 * 1024 + 1, 1024 * 1024], ids=["64 KiB and a byte", "1 MiB"])
def test_a_request_head_over_64_kib_is_refused_with_431(door: RunningServer, size: int) -> None:
    with connect(door) as tls:
        send(tls, head_with(size))
        assert statuses(read_until_closed(tls)) == [431]


def test_a_request_head_of_24_kib_is_served(door: RunningServer) -> None:
    # Large cookies or tokens: heads up to half the bound are always read.
    with connect(door) as tls:
        send(tls, head_with(24 * 1024))
        assert statuses(read_until_closed(tls)) == [200]


def test_both_content_length_and_transfer_encoding_get_one_answer_and_a_closed_connection(
    door: RunningServer,
) -> None:
    # A front proxy framing by Content-Length would forward the GET as part of the
    # body; here the chunked framing wins and nothing after the answer is read.
    body = b'{"to": "+14155550100"}'
    request = (
        b"POST /v1/verifications HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\n0\r\n\r\n"
        + b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    )
    with connect(door) as tls:
        send(tls, request)
        answered = statuses(read_until_closed(tls))
    assert len(answered) == 1
    assert answered != [200]


def test_two_different_content_lengths_are_refused_with_400(door: RunningServer) -> None:
    request = (
        b"POST /v1/verifications HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}}"
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    )
    with connect(door) as tls:
        send(tls, request)
        assert statuses(read_until_closed(tls)) == [400]


def test_honest_clients_are_served_while_idle_and_half_open_connections_wait(
    door: RunningServer,
) -> None:
    with ExitStack() as held:
        # Connections that finished their handshake and send nothing, and plain TCP
        # connections that never start one.
        for _ in range(40):
            held.enter_context(connect(door))
            held.enter_context(socket.create_connection(address(door), timeout=PATIENCE))
        with door.client(None) as client:
            assert [client.get("/healthz").status_code for _ in range(5)] == [200] * 5
