"""httpcore's network interface over asyncio's own streams, TLS included.

httpcore's default backend runs TLS through anyio's `TLSStream`: Python code
feeding a memory BIO on every read and write. asyncio's streams hand TLS to
the event loop's transport (uvloop's is compiled), which is what a webhook
delivery spends most of its CPU on once the database work is batched
(docs/benchmarks.md). The contract is httpcore's: its exceptions, its
`get_extra_info` keys.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable

import httpcore

# What asyncio raises when a connection fails under it.
_BROKEN = (OSError, ssl.SSLError, EOFError)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = None if local_address is None else (local_address, 0)
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, local_addr=local)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except _BROKEN as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        sock = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc)) from exc
        except _BROKEN as exc:
            raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc)) from exc
        except _BROKEN as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        # At once, without waiting for TLS close_notify: a receiver that hangs
        # would otherwise hold the connection open for the loop's shutdown
        # timeout. HTTP/1.1 framing, not close_notify, ends every response.
        self._writer.transport.abort()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            self._writer.transport.abort()
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except _BROKEN as exc:
            self._writer.transport.abort()
            raise httpcore.ConnectError(str(exc)) from exc
        return self

    def get_extra_info(self, info: str) -> object:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            sock: socket.socket | None = self._writer.get_extra_info("socket")
            return sock
        if info == "is_readable":
            # Data or end of stream already taken in by the loop, or a closing transport.
            return self._reader.at_eof() or self._writer.transport.is_closing()
        return None
