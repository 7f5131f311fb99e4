"""The listening address of `relay serve`, checked before anything else is touched, and
granian, the HTTP server, with Relay's front door (docs/operations.md).

One process serves embedded in this one; `--workers N` runs granian's
supervisor, which spawns N server processes on one shared socket.
"""

from __future__ import annotations

import asyncio
import errno
import math
import multiprocessing
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from granian import Granian
from granian.constants import HTTPModes, Interfaces, SSLProtocols
from granian.http import HTTP1Settings
from granian.server.embed import Server as EmbeddedServer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# hyper reads a request head into a buffer of this size, and one more read
# past it before it refuses with 431: a head is never held past twice the
# buffer. Half the bound keeps every head over the bound out.
HEAD_BUFFER_SHARE = 2


LISTEN_POLL_SECONDS = 0.005
LISTEN_WAIT_SECONDS = 30.0


def _reachable(host: str) -> str:
    """The address this process reaches a server listening on `host` at."""
    # Compared with, never bound to.
    wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104
    return wildcard.get(host, host)


class PortUnavailable(Exception):
    """The address cannot be bound; the message is the one line a user reads."""


def check_port(host: str, port: int) -> int:
    """Bind and release the address, so a taken port is one line before anything starts;
    the port, the one the system picked when `port` is 0.

    granian binds the port itself once Relay is ready; another program taking it
    in between gets the server's own error instead of this line.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As the server does: a restart may reuse a port whose old connections are in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            raise PortUnavailable(_reason(host, port, error)) from error
        picked: int = sock.getsockname()[1]
        return picked


def _reason(host: str, port: int, error: OSError) -> str:
    where = f"{host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return f"cannot listen on {where}: the port is already in use (pick one with --port)"
    if error.errno == errno.EACCES:
        return f"cannot listen on {where}: permission denied (ports below 1024 need privileges)"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: this machine has no such address (--host)"
    return f"cannot listen on {where}: {error.strerror or error}"


def url(host: str, port: int) -> str:
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


@dataclass(frozen=True)
class Listener:
    """Where and how Relay listens: the address, the certificate and the front door."""

    host: str
    port: int
    cert: Path
    key: Path
    # A request head must arrive within this many seconds, or the connection closes.
    header_timeout: float
    # A request head larger than this many bytes is refused with 431.
    max_request_head: int
    # Requests in flight get this long after a stop, then background work as long again.
    shutdown_timeout: float

    def options(self) -> dict[str, Any]:
        return {
            "address": self.host,
            "port": self.port,
            "interface": Interfaces.ASGI,
            "http": HTTPModes.http1,
            "websockets": False,
            "ssl_cert": self.cert,
            "ssl_key": self.key,
            "ssl_protocol_min": SSLProtocols.tls12,
            "http1_settings": HTTP1Settings(
                header_read_timeout=max(1, round(self.header_timeout * 1000)),
                max_buffer_size=self.max_request_head // HEAD_BUFFER_SHARE,
            ),
            # Relay logs through its own handlers (relay.log); granian's lines are its own.
            "log_enabled": False,
        }


class Embedded:
    """granian serving `app` on an event loop of its own, in the calling thread:
    `relay serve` runs it in its main thread, the test harness in another."""

    def __init__(self, app: App, listener: Listener, *, announce: str | None = None) -> None:
        self.started = threading.Event()
        self._announce = announce
        self._address = (_reachable(listener.host), listener.port)
        self._grace = listener.shutdown_timeout
        self._server = EmbeddedServer(self._watching(app), **listener.options())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._announcing: asyncio.Task[None] | None = None

    def _watching(self, app: App) -> App:
        """`app`, marked started once its start-up completed and the port accepts
        connections, its requests in flight known, so that a stop can end those that
        outlast the grace."""

        async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "lifespan":
                task = asyncio.current_task()
                if task is None:
                    await app(scope, receive, send)
                    return
                self._in_flight.add(task)
                try:
                    await app(scope, receive, send)
                finally:
                    self._in_flight.discard(task)
                return

            async def sending(message: Message) -> None:
                await send(message)
                if message["type"] == "lifespan.startup.complete":
                    self._announcing = asyncio.create_task(self._when_listening())

            await app(scope, receive, sending)

        return wrapped

    async def _when_listening(self) -> None:
        # granian's worker opens its listening socket after the app's start-up, and
        # says nothing when it has: "started" waits for a connection to succeed.
        deadline = asyncio.get_running_loop().time() + LISTEN_WAIT_SECONDS
        while True:
            try:
                _, writer = await asyncio.open_connection(*self._address)
            except OSError:
                if asyncio.get_running_loop().time() > deadline:
                    return
                await asyncio.sleep(LISTEN_POLL_SECONDS)
                continue
            writer.close()
            break
        if self._announce is not None:
            print(self._announce, flush=True)
        self.started.set()

    def serve(self, *, signals: bool = False) -> None:
        """Until `stop()` (or, with `signals`, SIGTERM or SIGINT): requests in flight
        finish, then the app's shutdown runs."""

        async def serving() -> None:
            self._loop = asyncio.get_running_loop()
            if signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    self._loop.add_signal_handler(sig, self._stopping)
            await self._server.serve()

        asyncio.run(serving())

    def stop(self) -> None:
        """From any thread."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopping)

    def _stopping(self) -> None:
        # The server waits for every request in flight before the app's shutdown
        # runs; one that outlasts the grace (a hung carrier) is cancelled, so the
        # shutdown still releases what that request held.
        self._server.stop()  # type: ignore[no-untyped-call]  # granian leaves it unannotated
        assert self._loop is not None
        self._loop.call_later(self._grace, self._cancel_in_flight)

    def _cancel_in_flight(self) -> None:
        for task in list(self._in_flight):
            task.cancel()


def run(app: App, listener: Listener, *, announce: str) -> bool:
    """Serve `app` in this process until SIGTERM or SIGINT; True when it had started.

    The process then exits 0, as a supervisor asking for a stop expects.
    """
    server = Embedded(app, listener, announce=announce)
    server.serve(signals=True)
    return server.started.is_set()


def run_processes(load_app: Callable[[], App], listener: Listener, workers: int) -> bool:
    """granian's supervisor: `workers` processes each build their app with `load_app`
    (a picklable callable), a dead one is started again; SIGTERM stops them all.
    False when a process failed to start."""
    # granian starts its processes the way multiprocessing's default does. Forked,
    # they would inherit this process's imports: prometheus-client loaded before
    # PROMETHEUS_MULTIPROC_DIR was named keeps each process's values to itself.
    multiprocessing.set_start_method("spawn", force=True)
    server = Granian(
        "relay",  # not imported: `load_app` makes each process's app
        workers=workers,
        respawn_failed_workers=True,
        # Past the requests' grace and the background work's, a process is killed.
        workers_kill_timeout=math.ceil(2 * listener.shutdown_timeout) + 5,
        **listener.options(),
    )
    try:
        server.serve(target_loader=load_app, wrap_loader=False)
    except SystemExit as stopped:
        return not stopped.code
    return True
