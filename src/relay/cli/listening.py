"""The listening socket of `relay serve`, bound before anything else is touched, and
the uvicorn server that says "listening" only once it is."""

from __future__ import annotations

import errno
import signal
import socket
from types import FrameType

import uvicorn


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


class Server(uvicorn.Server):
    """uvicorn's server, with two changes for an operator.

    "listening" is printed once the application has started and the socket
    accepts connections, never before. SIGTERM is how a supervisor asks for a
    stop: one that finished its graceful shutdown exits 0, instead of dying by
    the signal that uvicorn would raise again afterwards.
    """

    def __init__(self, config: uvicorn.Config, *, announce: str) -> None:
        super().__init__(config)
        self._announce = announce

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.should_exit:
            print(self._announce, flush=True)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if sig == signal.SIGTERM:
            self._captured_signals.remove(sig)
