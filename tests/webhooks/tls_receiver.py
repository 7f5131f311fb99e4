"""A real HTTPS webhook receiver on loopback, for the transport's tests.

The receiver is a small asyncio HTTP/1.1 server that upgrades each accepted
TCP connection to TLS itself, so it can count connections that never got as
far as TLS or a request.
"""

import asyncio
import contextlib
import datetime as dt
import gzip
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from relay.webhooks.guard import IPAddress, Resolver, system_resolver
from relay.webhooks.transport import DeliveryResult, post

LOOPBACK = [ipaddress.IPv4Network("127.0.0.0/8")]
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


def write_identity(directory: Path, ca_name: str) -> ServerIdentity:
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
    # Routes in SERVE_AGAIN keep the connection for the next request; set when
    # the client closes one of those while it waits.
    client_closed: asyncio.Event = field(default_factory=asyncio.Event)
    # Set at each request read.
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
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
            self.arrived.set()
            await ROUTES[request.path](self, writer)
            while request.path in SERVE_AGAIN:
                request = await self._next_request(reader)
                self.requests.append(request)
                await ROUTES[request.path](self, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away or failed TLS, as several tests intend
        finally:
            writer.close()

    async def _next_request(self, reader: asyncio.StreamReader) -> ReceivedRequest:
        try:
            return await _read_request(reader)
        except (OSError, asyncio.IncompleteReadError):
            self.client_closed.set()
            raise


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


async def _again(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    await writer.drain()


async def _cookie(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 204 No Content\r\nSet-Cookie: session=receiver-secret\r\n\r\n")
    await writer.drain()


GZIPPED = gzip.compress(b'{"received":true}' * 100)


async def _gzip(receiver: Receiver, writer: asyncio.StreamWriter) -> None:
    await _respond(writer, "200 OK", GZIPPED, Content_Encoding="gzip")


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
    "/again": _again,
    "/cookie": _cookie,
    "/gzip": _gzip,
}
# Answered without "Connection: close": the next request may follow on the same connection.
SERVE_AGAIN = frozenset({"/again", "/cookie"})


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
