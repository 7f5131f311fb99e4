"""The listening socket of `relay serve`, bound before anything else is touched, and
the uvicorn server that says "listening" only once it is."""

from __future__ import annotations

import errno
import signal
import socket
import threading
import time
from types import FrameType

import uvicorn

STARTED_POLL_SECONDS = 0.005


class PortUnavailable(Exception):
    """The address cannot be bound; the message is the one line a user reads."""


def bind(host: str, port: int) -> socket.socket:
    """A bound (not yet listening) socket; uvicorn listens on it once the app has started."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # As uvicorn does: a restart may reuse a port whose old connections are in TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise PortUnavailable(_reason(host, port, error)) from error
    # Spawned server processes (--workers) receive it.
    sock.set_inheritable(True)
    return sock


def _reason(host: str, port: int, error: OSError) -> str:
    where = f"{host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return f"cannot listen on {where}: the port is already in use (pick one with --port)"
    if error.errno == errno.EACCES:
        return f"cannot listen on {where}: permission denied (ports below 1024 need privileges)"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: this machine has no such address (--host)"
    return f"cannot listen on {where}: {error.strerror or error}"


def url(host: str, sock: socket.socket) -> str:
    """The address as clients reach it; with port 0, the port the system picked."""
    port = sock.getsockname()[1]
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def run(config: uvicorn.Config, sock: socket.socket, *, announce: str) -> bool:
    """Serve on `sock` until stopped; True when the server had started.

    Two things for an operator, through uvicorn's public API alone. "listening"
    is printed once the application has started and the socket accepts
    connections, never before. SIGTERM is how a supervisor asks for a stop: one
    that finished its graceful shutdown exits 0, instead of dying by the signal
    that uvicorn raises again afterwards, into the handler it found installed.
    """
    server = uvicorn.Server(config)

    def stop(sig: int, frame: FrameType | None) -> None:
        # Before uvicorn installs its own handler, or when it hands the signal
        # back after its shutdown: either way, stop (again) without dying.
        server.should_exit = True

    previous = signal.signal(signal.SIGTERM, stop)
    announcer = threading.Thread(
        target=_announce_when_started, args=(server, announce), daemon=True
    )
    announcer.start()
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.should_exit = True  # the announcer's cue, if the server never started
        announcer.join()
    return server.started


def _announce_when_started(server: uvicorn.Server, announce: str) -> None:
    # uvicorn sets `started` once every socket listens; it offers no event to wait on.
    while not server.started and not server.should_exit:
        time.sleep(STARTED_POLL_SECONDS)
    if server.started and not server.should_exit:
        print(announce, flush=True)
