"""One outbound webhook POST: guarded destination, verified TLS, one deadline.

The host name is resolved once, every address is checked by
`relay.webhooks.guard`, and the TCP connection goes to a checked IP address,
while TLS still sends the host name as SNI and verifies the certificate
against it. httpx sees an ordinary transport; the guard lives in the httpcore
network backend, below any place where a name could be looked up again.
"""

from __future__ import annotations

import asyncio
import functools
import select
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import certifi
import httpcore
import httpx

from relay.webhooks.guard import (
    GuardError,
    IPNetwork,
    RefusedDestinationError,
    Resolver,
    UnresolvableHostError,
    resolve_permitted,
    system_resolver,
    url_problem,
)

MAX_RESPONSE_BYTES = 64 * 1024
USER_AGENT = "Relay-Webhooks/1"

DeliveryError = Literal[
    "invalid_url",
    "refused_address",
    "dns_error",
    "connect_error",
    "tls_error",
    "timeout",
    "protocol_error",
    "network_error",
    "redirect",
    "http_status",
]


@dataclass(frozen=True)
class DeliveryResult:
    """How one delivery attempt ended. `ok` is True exactly when `error` is None."""

    status_code: int | None
    error: DeliveryError | None
    duration_ms: int
    ok: bool
    # The first MAX_RESPONSE_BYTES of the response body, for the attempt log.
    body: bytes = b""


class WebhookClient:
    """Keep-alive connections for many deliveries: one TLS handshake per receiver, not per event.

    The private-address guard runs when a connection is opened (the address it
    connects to is the one checked), so reusing that connection is as safe as
    opening it was. `concurrency` bounds the connections held at once; a
    delivery worker never runs more attempts than that.
    """

    def __init__(
        self,
        *,
        timeout: float,
        allowed_networks: Sequence[IPNetwork],
        ca_bundle: str | None,
        resolver: Resolver = system_resolver,
        concurrency: int = 16,
    ) -> None:
        self._timeout = timeout
        self._allowed = allowed_networks
        transport = GuardedTransport(
            ssl_context=_ssl_context(ca_bundle),
            allowed=allowed_networks,
            resolver=resolver,
            max_connections=concurrency,
        )
        self._client = _client(transport, timeout)

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> DeliveryResult:
        """POST `body` to `url` once; any 2xx is success. Never raises for network problems.

        The timeout bounds the whole attempt: resolution, connect, TLS, sending and
        reading the (truncated) response. Redirects are failures, never followed.
        """
        started = time.monotonic()
        problem = url_problem(url, allowed=self._allowed)
        if problem is not None:
            error: DeliveryError = (
                "refused_address" if problem == "refused_address" else "invalid_url"
            )
            return _failure(error, started)
        try:
            async with asyncio.timeout(self._timeout):
                status, excerpt = await _exchange(self._client, url, body, headers)
        except _NETWORK_ERRORS as exc:
            return _failure(_classify(exc), started)
        return _outcome(status, excerpt, started)

    async def aclose(self) -> None:
        await self._client.aclose()


async def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,  # noqa: ASYNC109 -- the deadline is applied with asyncio.timeout inside
    allowed_networks: Sequence[IPNetwork],
    ca_bundle: str | None,
    resolver: Resolver = system_resolver,
) -> DeliveryResult:
    """One delivery on a connection of its own; see `WebhookClient.post`.

    An unreadable `ca_bundle` is a configuration error and does raise.
    """
    client = WebhookClient(
        timeout=timeout, allowed_networks=allowed_networks, ca_bundle=ca_bundle, resolver=resolver
    )
    try:
        return await client.post(url, body, headers)
    finally:
        await client.aclose()


def _client(transport: httpx.AsyncBaseTransport, timeout: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=transport,
        follow_redirects=False,
        # Nothing from the environment (proxies, netrc): the guard must see
        # the real destination and no credentials may leak to it.
        trust_env=False,
        # Per phase only; the deadline for the whole attempt is the
        # asyncio.timeout around the exchange.
        timeout=timeout,
        headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
    )


async def _exchange(
    client: httpx.AsyncClient, url: str, body: bytes, headers: Mapping[str, str]
) -> tuple[int, bytes]:
    async with client.stream("POST", url, content=body, headers=dict(headers)) as response:
        return response.status_code, await _read_at_most(response, MAX_RESPONSE_BYTES)


async def _read_at_most(response: httpx.Response, limit: int) -> bytes:
    # Raw bytes, counted as they arrive: a receiver cannot make us buffer an
    # endless or decompression-bombed body. Leaving early closes the connection.
    received = bytearray()
    async for chunk in response.aiter_raw():
        received += chunk[: limit - len(received)]
        if len(received) >= limit:
            break
    return bytes(received)


def _outcome(status: int, excerpt: bytes, started: float) -> DeliveryResult:
    error: DeliveryError | None = None
    if 300 <= status < 400:
        error = "redirect"
    elif not 200 <= status < 300:
        error = "http_status"
    return DeliveryResult(status, error, _elapsed_ms(started), error is None, excerpt)


def _failure(error: DeliveryError, started: float) -> DeliveryResult:
    return DeliveryResult(None, error, _elapsed_ms(started), False)


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


_NETWORK_ERRORS = (
    GuardError,
    TimeoutError,
    OSError,
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpx.TransportError,
    httpx.InvalidURL,
)


def _classify(exc: BaseException) -> DeliveryError:
    if isinstance(exc, RefusedDestinationError):
        return "refused_address"
    if isinstance(exc, UnresolvableHostError):
        return "dns_error"
    if isinstance(exc, httpx.InvalidURL):
        return "invalid_url"
    if isinstance(exc, TimeoutError | httpcore.TimeoutException | httpx.TimeoutException):
        return "timeout"
    if _caused_by_ssl_error(exc):
        return "tls_error"
    if isinstance(exc, httpcore.ConnectError | httpx.ConnectError | OSError):
        return "connect_error"
    if isinstance(exc, httpcore.ProtocolError | httpx.ProtocolError):
        return "protocol_error"
    return "network_error"


def _caused_by_ssl_error(exc: BaseException) -> bool:
    # httpcore wraps ssl.SSLError in ConnectError or ReadError, and its pool
    # re-raises "from None", so the SSLError survives only as __context__.
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ssl.SSLError):
            return True
        current = current.__cause__ or current.__context__
    return False


@functools.lru_cache(maxsize=8)
def _ssl_context(ca_bundle: str | None) -> ssl.SSLContext:
    """Verification always on: certifi's roots, plus the operator's CA bundle if any."""
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_bundle is not None:
        context.load_verify_locations(cafile=ca_bundle)
    return context


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses the guard permits, resolving each host once."""

    def __init__(
        self,
        *,
        allowed: Sequence[IPNetwork],
        resolver: Resolver,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._allowed = tuple(allowed)
        self._resolver = resolver
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await resolve_permitted(
            host, port, allowed=self._allowed, resolver=self._resolver
        )
        last_error: Exception | None = None
        for address in addresses:
            try:
                # An IP literal: the inner backend does no DNS lookup of its own.
                stream = await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
                return KeptSocketStream(stream)
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as exc:
                last_error = exc
        assert last_error is not None  # resolve_permitted never returns an empty list
        raise last_error

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class KeptSocketStream(httpcore.AsyncNetworkStream):
    """A network stream that answers httpcore's `is_readable` from the socket kept at connect.

    httpcore asks every pooled connection `is_readable` on every request (has
    the receiver closed it?). anyio's TLS stream rebuilds its whole attribute
    map for each such lookup: with 16 pooled connections that was a fifth of
    webhook delivery's CPU (py-spy, bench/webhook_bench.py). The socket is the
    same before and after TLS, so it is looked up once.
    """

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        secured = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return KeptSocketStream(secured)

    def get_extra_info(self, info: str) -> object:
        if info == "is_readable":
            return socket_is_readable(self._socket)
        return self._inner.get_extra_info(info)


def socket_is_readable(sock: socket.socket | None) -> bool:
    """Would a read return at once (data, or the end of a closed connection)?"""
    if sock is None or sock.fileno() < 0:
        return True  # gone: the next read returns b"", as for a closed connection
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport over an httpcore pool that uses `GuardedBackend`.

    It raises httpcore's exceptions and `GuardError` as they are, unmapped.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext,
        allowed: Sequence[IPNetwork],
        resolver: Resolver,
        max_connections: int = 10,
    ) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            network_backend=GuardedBackend(allowed=allowed, resolver=resolver),
            http1=True,
            http2=False,
            retries=0,
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=30.0,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = httpcore.URL(
            scheme=request.url.raw_scheme,
            host=request.url.raw_host,
            port=request.url.port,
            target=request.url.raw_path,
        )
        core_request = httpcore.Request(
            request.method,
            url,
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        core_response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=core_response.status,
            headers=core_response.headers,
            stream=_ResponseStream(core_response),
            extensions=core_response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_stream():
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()
