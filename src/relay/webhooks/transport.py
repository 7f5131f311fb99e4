"""One outbound webhook POST: guarded destination, verified TLS, one deadline.

The destination is checked where each connection opens, in
`relay.webhooks.network`; this module is the attempt around it: the URL
rules, the deadline, the response cap and how a failure is named.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Mapping, Sequence
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
    endpoint,
    system_resolver,
    url_problem,
)
from relay.webhooks.network import IDLE_POOL_SECONDS, guarded_pool, socket_is_readable

__all__ = ["DeliveryResult", "WebhookClient", "post", "socket_is_readable"]

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

    @property
    def excerpt(self) -> str | None:
        """The start of the receiver's answer as printable text, for the console."""
        return excerpt(self.body)


EXCERPT_CHARACTERS = 200


def excerpt(body: bytes) -> str | None:
    """At most EXCERPT_CHARACTERS of `body`, decoded leniently, control characters (a
    receiver's answer is anybody's text) turned into spaces; None when nothing is left."""
    text = body[: EXCERPT_CHARACTERS * 4].decode("utf-8", errors="replace")
    printable = "".join(c if c.isprintable() else " " for c in text)
    shown = " ".join(printable.split())[:EXCERPT_CHARACTERS]
    return shown or None


class WebhookClient:
    """Keep-alive connections for many deliveries: one TLS handshake per receiver, not per event.

    One connection pool per endpoint (scheme, host and port as written), of at
    most `concurrency` connections: a pool is searched on every request, so
    small pools keep that cheap, and one receiver's connections never crowd
    out another's. A pool idle for `IDLE_POOL_SECONDS` is closed.

    The private-address guard runs when a connection is opened (the address it
    connects to is the one checked), so reusing that connection is as safe as
    opening it was.
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
        self._ssl_context = _ssl_context(ca_bundle)
        self._resolver = resolver
        self._concurrency = concurrency
        self._pools: dict[str, _Pool] = {}
        self._swept = time.monotonic()

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
        pool = self._pool(endpoint(url))
        pool.in_flight += 1
        try:
            async with asyncio.timeout(self._timeout):
                status, excerpt = await _exchange(pool.pool, url, body, headers, self._timeout)
        except _NETWORK_ERRORS as exc:
            return _failure(_classify(exc), started)
        finally:
            pool.in_flight -= 1
            pool.used = time.monotonic()
            if pool.used - self._swept > IDLE_POOL_SECONDS:
                await self._close_idle(pool.used)
        return _outcome(status, excerpt, started)

    def _pool(self, key: str) -> _Pool:
        pool = self._pools.get(key)
        if pool is None:
            connections = guarded_pool(
                ssl_context=self._ssl_context,
                allowed=self._allowed,
                resolver=self._resolver,
                max_connections=self._concurrency,
            )
            pool = self._pools[key] = _Pool(connections)
        return pool

    async def _close_idle(self, now: float) -> None:
        self._swept = now
        idle = [
            key
            for key, pool in self._pools.items()
            if not pool.in_flight and now - pool.used > IDLE_POOL_SECONDS
        ]
        for key in idle:
            await self._pools.pop(key).pool.aclose()

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.pool.aclose()


@dataclass
class _Pool:
    pool: httpcore.AsyncConnectionPool
    in_flight: int = 0
    used: float = 0.0


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


async def _exchange(
    pool: httpcore.AsyncConnectionPool,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    timeout: float,  # noqa: ASYNC109 -- per phase; the caller holds the whole deadline
) -> tuple[int, bytes]:
    # httpx parses the URL (IDNA, IPv6 literals, the Host header's form);
    # httpcore's pool does the rest. Nothing is read from the environment
    # (proxies, netrc): the guard sees the real destination, and no
    # credentials leak to it. Redirects are never followed.
    parsed = httpx.URL(url)
    request = httpcore.Request(
        "POST",
        httpcore.URL(
            scheme=parsed.raw_scheme,
            host=parsed.raw_host,
            port=parsed.port,
            target=parsed.raw_path,
        ),
        headers=_request_headers(parsed, body, headers),
        content=body,
        extensions={
            "timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        },
    )
    response = await pool.handle_async_request(request)
    try:
        return response.status, await _read_at_most(response, MAX_RESPONSE_BYTES)
    finally:
        await response.aclose()


def _request_headers(
    url: httpx.URL, body: bytes, headers: Mapping[str, str]
) -> list[tuple[bytes, bytes]]:
    given = {name.lower() for name in headers}
    defaults = [
        (b"Host", url.netloc),
        (b"Accept", b"*/*"),
        # Identity: the answer's bytes are counted, never decompressed.
        (b"Accept-Encoding", b"identity"),
        (b"Connection", b"keep-alive"),
        (b"User-Agent", USER_AGENT.encode()),
        (b"Content-Length", str(len(body)).encode()),
    ]
    return [
        *((name, value) for name, value in defaults if name.decode().lower() not in given),
        *((name.encode(), value.encode()) for name, value in headers.items()),
    ]


async def _read_at_most(response: httpcore.Response, limit: int) -> bytes:
    # Raw bytes, counted as they arrive: a receiver cannot make us buffer an
    # endless or decompression-bombed body. Leaving early closes the connection.
    received = bytearray()
    async for chunk in response.aiter_stream():
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
