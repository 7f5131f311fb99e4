"""Not stock Jasmin: `jasmin_reference.py --tcp-nodelay` puts this directory on jasmind's path.

Twisted leaves Nagle's algorithm on, so jasmind's small writes (AMQP frames, SMPP
PDUs) can wait for the peer's delayed ACK. This turns TCP_NODELAY on for every
TCP connection Twisted makes or accepts in that process, to measure what the
waiting costs. Jasmin's own code is unchanged.
"""

import contextlib
import socket

from twisted.internet import tcp

_connect_done = tcp.BaseClient._connectDone
_server_init = tcp.Server.__init__


def _no_delay(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # not a TCP socket
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _client_connected(self, *args, **kwargs):
    _no_delay(self.socket)
    return _connect_done(self, *args, **kwargs)


def _server_accepted(self, sock, *args, **kwargs):
    _no_delay(sock)
    return _server_init(self, sock, *args, **kwargs)


tcp.BaseClient._connectDone = _client_connected
tcp.Server.__init__ = _server_accepted
