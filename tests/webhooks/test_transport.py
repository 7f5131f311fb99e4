"""The outbound POST against a real HTTPS receiver on loopback.

The receiver is a small asyncio HTTP/1.1 server that upgrades each accepted
TCP connection to TLS itself, so it can count connections that never got as
far as TLS or a request.
"""

import asyncio
import contextlib
import datetime as dt
import ipaddress
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from relay.webhooks import verify
from relay.webhooks.guard import IPAddress, Resolver, system_resolver
from relay.webhooks.signature import sign
from relay.webhooks.transport import (
    MAX_RESPONSE_BYTES,
    DeliveryResult,
    WebhookClient,
    post,
)

LOOPBACK = [ipaddress.IPv4Network("127.0.0.0/8")]
SECRET = "whsec_transport_test"
DEADLINE = 2.0


# --- certificates -----------------------------------------------------------


@dataclass(frozen=True)
class ServerIdentity:
    ca_path: Path
    cert_path: Path
    key_path: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _issue_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _issue_leaf(
    ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _write_identity(directory: Path, ca_name: str) -> ServerIdentity:
    ca_cert, ca_key = _issue_ca(ca_name)
    leaf_cert, leaf_key = _issue_leaf(ca_cert, ca_key)
    identity = ServerIdentity(directory / "ca.pem", directory / "leaf.pem", directory / "key.pem")
    identity.ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    identity.cert_path.write_bytes(leaf_cert.public_bytes(serialization.Encoding.PEM))
    identity.key_path.write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return identity


@pytest.fixture(scope="session")
def trusted_identity(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    return _write_identity(tmp_path_factory.mktemp("trusted-pki"), "Relay Test CA")


@pytest.fixture(scope="session")
def rogue_identity(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    return _write_identity(tmp_path_factory.mktemp("rogue-pki"), "Someone Else's CA")


# --- the receiver -----------------------------------------------------------


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Route = Callable[["Receiver", asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Receiver:
    ssl_context: ssl.SSLContext
    connections: int = 0
    requests: list[ReceivedRequest] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)
    huge_bytes_sent: int = 0
    # Set at teardown: routes that hang wait on it, so handlers end by
    # themselves instead of being cancelled under asyncio's feet.
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    # Route /keep-alive: a test sets drop_idle, the receiver drops the kept-alive
    # connection and sets dropped.
    drop_idle: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    @property
    def paths(self) -> list[str]:
        return [request.path for request in self.requests]

    async def start(self) -> None:
        self.ssl_context.sni_callback = self._record_server_name
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        self.closing.set()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    def _record_server_name(
        self, _sock: ssl.SSLObject, name: str | None, _context: ssl.SSLContext
    ) -> None:
        self.server_names.append(name)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        try:
            await writer.start_tls(self.ssl_context)
            request = await _read_request(reader)
            self.requests.append(request)
            await ROUTES[request.path](self, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away or failed TLS, as several tests intend
        finally:
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> ReceivedRequest:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    request_line, *header_lines = head.rstrip("\r\n").split("\r\n")
    method, path, _version = request_line.split(" ")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return ReceivedRequest(method, path, headers, body)


async def _respond(
    writer: asyncio.StreamWriter, status: str, body: bytes = b"", **headers: str
) -> None:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()


async def _ok(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    await _respond(writer, "200 OK", b'{"received":true}', Content_Type="application/json")


async def _no_content(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    await writer.drain()


async def _error(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    await _respond(writer, "500 Internal Server Error", b"boom")


async def _redirect(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    await _respond(writer, "302 Found", Location=receiver.url("/target"))


async def _hang(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    await receiver.closing.wait()


async def _stall_body(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
    await writer.drain()
    await receiver.closing.wait()


async def _huge(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
    chunk = b"x" * 16384
    # Endless as far as the client can tell; the cap only stops a broken
    # client from filling the test machine.
    while receiver.huge_bytes_sent < 256 * 1024 * 1024:
        writer.write(chunk)
        await writer.drain()
        receiver.huge_bytes_sent += len(chunk)


async def _close(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    writer.close()


async def _keep_alive(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    # No "Connection: close": the client keeps the connection idle in its pool.
    # When the test says so, the receiver drops it, as an idle timeout would.
    writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    await writer.drain()
    await receiver.drop_idle.wait()
    writer.transport.abort()
    receiver.dropped.set()


ROUTES: dict[str, Route] = {
    "/ok": _ok,
    "/no-content": _no_content,
    "/error": _error,
    "/redirect": _redirect,
    "/target": _ok,
    "/hang": _hang,
    "/stall-body": _stall_body,
    "/huge": _huge,
    "/close": _close,
    "/keep-alive": _keep_alive,
}


@contextlib.asynccontextmanager
async def running_receiver(identity: ServerIdentity) -> AsyncIterator[Receiver]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(identity.cert_path, identity.key_path)
    receiver = Receiver(context)
    await receiver.start()
    try:
        yield receiver
    finally:
        await receiver.stop()


@pytest.fixture
async def receiver(trusted_identity: ServerIdentity) -> AsyncIterator[Receiver]:
    async with running_receiver(trusted_identity) as running:
        yield running


@pytest.fixture
async def untrusted_receiver(rogue_identity: ServerIdentity) -> AsyncIterator[Receiver]:
    async with running_receiver(rogue_identity) as running:
        yield running


# --- helpers ----------------------------------------------------------------


class FixedResolver:
    """Answers every name with the same addresses and counts lookups."""

    def __init__(self, *answers: str) -> None:
        self.answers = [ipaddress.ip_address(answer) for answer in answers]
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[IPAddress]:
        self.lookups.append(host)
        return self.answers


async def deliver(
    url: str,
    identity: ServerIdentity,
    *,
    body: bytes = b'{"id":"evt_1"}',
    headers: dict[str, str] | None = None,
    deadline: float = DEADLINE,
    allowed: Sequence[ipaddress.IPv4Network] = tuple(LOOPBACK),
    resolver: Resolver = system_resolver,
) -> DeliveryResult:
    return await post(
        url,
        body,
        headers or {"Content-Type": "application/json"},
        timeout=deadline,
        allowed_networks=allowed,
        ca_bundle=str(identity.ca_path),
        resolver=resolver,
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- outcomes ---------------------------------------------------------------


async def test_a_200_answer_is_a_success(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/ok"), trusted_identity)

    assert result.ok
    assert (result.status_code, result.error) == (200, None)
    assert result.body == b'{"received":true}'
    assert 0 <= result.duration_ms < DEADLINE * 1000


async def test_a_204_answer_is_a_success(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/no-content"), trusted_identity)

    assert result.ok
    assert result.status_code == 204


async def test_a_500_answer_is_a_failure_that_keeps_the_status(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/error"), trusted_identity)

    assert not result.ok
    assert (result.status_code, result.error) == (500, "http_status")
    assert result.body == b"boom"


async def test_redirect_is_a_failure_and_is_not_followed(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/redirect"), trusted_identity)

    assert not result.ok
    assert (result.status_code, result.error) == (302, "redirect")
    assert receiver.paths == ["/redirect"]


async def test_a_receiver_that_never_answers_times_out_at_the_deadline(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    started = time.monotonic()

    result = await deliver(receiver.url("/hang"), trusted_identity, deadline=0.5)

    elapsed = time.monotonic() - started
    assert (result.ok, result.status_code, result.error) == (False, None, "timeout")
    assert 0.5 <= elapsed < 2.5  # the upper bound is loose for loaded CI machines
    assert receiver.paths == ["/hang"]


async def test_a_body_that_stalls_after_the_headers_times_out_at_the_deadline(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    """The deadline covers the whole attempt, not each read separately."""
    started = time.monotonic()

    result = await deliver(receiver.url("/stall-body"), trusted_identity, deadline=0.5)

    assert (result.ok, result.error) == (False, "timeout")
    assert time.monotonic() - started < 2.5


async def test_a_huge_response_body_is_cut_at_64_kib_and_does_not_hang(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/huge"), trusted_identity)

    assert result.ok
    assert len(result.body) == MAX_RESPONSE_BYTES == 64 * 1024
    assert result.duration_ms < 1000
    await asyncio.sleep(0.05)  # let the receiver notice the closed connection
    assert receiver.huge_bytes_sent < 8 * 1024 * 1024


async def test_a_receiver_that_closes_without_answering_is_a_failure_not_an_exception(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(receiver.url("/close"), trusted_identity)

    assert (result.ok, result.status_code, result.error) == (False, None, "protocol_error")


async def test_a_closed_port_is_a_connect_error(trusted_identity: ServerIdentity) -> None:
    result = await deliver(f"https://127.0.0.1:{closed_port()}/ok", trusted_identity)

    assert (result.ok, result.error) == (False, "connect_error")


async def test_a_name_that_does_not_resolve_is_a_dns_error(
    trusted_identity: ServerIdentity,
) -> None:
    async def failing(host: str, port: int) -> Sequence[IPAddress]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    result = await post(
        "https://hooks.example.com/relay",
        b"{}",
        {},
        timeout=DEADLINE,
        allowed_networks=LOOPBACK,
        ca_bundle=str(trusted_identity.ca_path),
        resolver=failing,
    )

    assert (result.ok, result.error) == (False, "dns_error")


# --- what the receiver gets -------------------------------------------------


async def test_the_receiver_gets_exactly_the_bytes_sent_and_a_valid_signature(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    body = '{"id":"evt_1","data":{"note":"caf\u00e9 \u2713"}}\n  '.encode()
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "Relay-Signature": sign(body, [SECRET], timestamp=timestamp),
    }

    result = await deliver(receiver.url("/ok"), trusted_identity, body=body, headers=headers)

    assert result.ok
    [received] = receiver.requests
    assert (received.method, received.body) == ("POST", body)
    assert received.headers["relay-signature"] == headers["Relay-Signature"]
    assert received.headers["content-type"] == "application/json"
    verify(received.body, received.headers["relay-signature"], SECRET)


async def test_tls_uses_the_url_host_while_connecting_to_the_checked_address(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    resolver = FixedResolver("127.0.0.1")

    result = await deliver(
        receiver.url("/ok", host="localhost"), trusted_identity, resolver=resolver
    )

    assert result.ok
    assert resolver.lookups == ["localhost"]
    assert receiver.server_names == ["localhost"]
    assert receiver.requests[0].headers["host"] == f"localhost:{receiver.port}"


# --- TLS --------------------------------------------------------------------


async def test_a_certificate_from_an_unknown_ca_is_a_tls_error(
    untrusted_receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    result = await deliver(untrusted_receiver.url("/ok"), trusted_identity)

    assert (result.ok, result.status_code, result.error) == (False, None, "tls_error")
    assert untrusted_receiver.connections == 1
    assert untrusted_receiver.requests == []


async def test_without_the_extra_ca_bundle_the_test_ca_is_not_trusted(
    receiver: Receiver,
) -> None:
    result = await post(
        receiver.url("/ok"),
        b"{}",
        {},
        timeout=DEADLINE,
        allowed_networks=LOOPBACK,
        ca_bundle=None,
    )

    assert result.error == "tls_error"
    assert receiver.requests == []


async def test_a_certificate_for_another_name_is_a_tls_error(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    """The certificate names localhost; reaching it as another name must fail."""
    resolver = FixedResolver("127.0.0.1")

    result = await deliver(
        receiver.url("/ok", host="hooks.example.com"), trusted_identity, resolver=resolver
    )

    assert result.error == "tls_error"
    assert receiver.server_names == ["hooks.example.com"]
    assert receiver.requests == []


# --- the destination guard --------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
async def test_loopback_is_refused_without_allowed_networks_and_nothing_connects(
    receiver: Receiver, trusted_identity: ServerIdentity, host: str
) -> None:
    result = await deliver(receiver.url("/ok", host=host), trusted_identity, allowed=())

    assert (result.ok, result.status_code, result.error) == (False, None, "refused_address")
    await asyncio.sleep(0.05)  # a connection, had one been made, would be accepted by now
    assert receiver.connections == 0


async def test_a_public_looking_name_resolving_to_a_private_address_is_refused(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    resolver = FixedResolver("10.0.0.7")

    result = await deliver("https://hooks.example.com/relay", trusted_identity, resolver=resolver)

    assert (result.ok, result.error) == (False, "refused_address")
    assert resolver.lookups == ["hooks.example.com"]


async def test_a_public_looking_name_resolving_to_loopback_never_connects(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    resolver = FixedResolver("127.0.0.1")

    result = await deliver(
        receiver.url("/ok", host="hooks.example.com"),
        trusted_identity,
        allowed=(),
        resolver=resolver,
    )

    assert result.error == "refused_address"
    await asyncio.sleep(0.05)
    assert receiver.connections == 0


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/ok",
        "https://user:secret@localhost/ok",
        "https://localhost/" + "a" * 2048,
        "https:///ok",
    ],
)
async def test_an_unusable_url_fails_without_any_lookup(
    url: str, trusted_identity: ServerIdentity
) -> None:
    resolver = FixedResolver("127.0.0.1")

    result = await deliver(url, trusted_identity, resolver=resolver)

    assert (result.ok, result.error) == (False, "invalid_url")
    assert resolver.lookups == []


async def test_a_pooled_connection_the_receiver_dropped_is_replaced_not_reused(
    receiver: Receiver, trusted_identity: ServerIdentity
) -> None:
    client = WebhookClient(
        timeout=DEADLINE, allowed_networks=tuple(LOOPBACK), ca_bundle=str(trusted_identity.ca_path)
    )
    try:
        first = await client.post(receiver.url("/keep-alive"), b"{}", {})
        receiver.drop_idle.set()
        await asyncio.wait_for(receiver.dropped.wait(), DEADLINE)
        await asyncio.sleep(0.01)  # the end of the stream reaches the client's socket
        second = await client.post(receiver.url("/keep-alive"), b"{}", {})
    finally:
        await client.aclose()
    assert (first.ok, second.ok) == (True, True), (first, second)
    assert receiver.connections == 2
