"""The guarded network layer under httpx: the SSRF check where a connection opens.

The host name is resolved once, every address is checked by
`relay.webhooks.guard`, and the TCP connection goes to a checked IP address,
while TLS still sends the host name as SNI and verifies the certificate
against it. The guard lives in the httpcore network backend, below any place
where a name could be looked up again.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterable, Sequence

import httpcore

from relay.webhooks.guard import IPNetwork, Resolver, resolve_permitted
from relay.webhooks.streams import AsyncioBackend

# As long as an idle keep-alive connection is kept: a pool with none left is closed.
IDLE_POOL_SECONDS = 30.0


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
        self._inner = inner or AsyncioBackend()

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


def guarded_pool(
    *,
    ssl_context: ssl.SSLContext,
    allowed: Sequence[IPNetwork],
    resolver: Resolver,
    max_connections: int = 10,
) -> httpcore.AsyncConnectionPool:
    """An HTTP/1.1 keep-alive pool whose every connection goes through `GuardedBackend`.

    It raises httpcore's exceptions and `GuardError` as they are, unmapped.
    """
    return httpcore.AsyncConnectionPool(
        ssl_context=ssl_context,
        network_backend=GuardedBackend(allowed=allowed, resolver=resolver),
        http1=True,
        http2=False,
        retries=0,
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        keepalive_expiry=IDLE_POOL_SECONDS,
    )
