"""Two loopback twins for retry tests: a server that answers from a script, and a
TLS proxy that can lose an answer on its way back to the client."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# --- a server answering from a script ------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b'{"ok": true}'
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Script:
    """Answers in order; the last one repeats. Records every request it got."""

    answers: list[Answer]
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def next_answer(self, request: Seen) -> Answer:
        self.seen.append(request)
        return self.answers[min(len(self.seen), len(self.answers)) - 1]

    def keys(self) -> list[str | None]:
        return [request.headers.get("idempotency-key") for request in self.seen]


class _ScriptHandler(BaseHTTPRequestHandler):
    server: _ScriptServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        answer = self.server.script.next_answer(Seen(self.command, self.path, headers, body))
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)


class _ScriptServer(ThreadingHTTPServer):
    daemon_threads = True
    script: Script


@contextlib.contextmanager
def scripted(*answers: Answer) -> Iterator[Script]:
    server = _ScriptServer(("127.0.0.1", 0), _ScriptHandler)
    server.script = Script(list(answers), port=server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.script
    finally:
        server.shutdown()
        server.server_close()


# --- a TLS proxy that loses chosen answers ---------------------------------------


@dataclass
class CuttingProxy:
    """Terminates TLS with the server's own certificate, forwards each request,
    reads Relay's whole answer, and for a request `cut` picks closes the
    client's connection instead of passing the answer on: Relay did the work,
    the client never hears of it. Only the first request starting with
    `cut_first` loses its answer."""

    upstream_port: int
    cert: Path
    key: Path
    cut_first: bytes
    port: int = 0
    heads: list[bytes] = field(default_factory=list)
    cuts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def serve(self, listener: socket.socket) -> None:
        server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_side.load_cert_chain(self.cert, self.key)
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(server_side, raw), daemon=True).start()

    def _relay(self, server_side: ssl.SSLContext, raw: socket.socket) -> None:
        upstream_side = ssl.create_default_context(cafile=self.cert)
        with (
            contextlib.suppress(OSError),
            server_side.wrap_socket(raw, server_side=True) as client,
            socket.create_connection(("127.0.0.1", self.upstream_port)) as plain,
            upstream_side.wrap_socket(plain, server_hostname="localhost") as upstream,
        ):
            client_in, upstream_in = client.makefile("rb"), upstream.makefile("rb")
            while (request := _read_message(client_in)) is not None:
                upstream.sendall(request)
                answer = _read_message(upstream_in)
                if answer is None or self._cuts(request):
                    return
                client.sendall(answer)

    def _cuts(self, request: bytes) -> bool:
        head = request.split(b"\r\n\r\n", 1)[0]
        with self._lock:
            self.heads.append(head)
            if self.cuts or not head.startswith(self.cut_first):
                return False
            self.cuts += 1
            return True

    def header_values(self, name: str, request_line: bytes) -> list[str]:
        """Header `name` of each forwarded request starting with `request_line`."""
        prefix = name.lower().encode() + b":"
        return [
            line.split(b":", 1)[1].strip().decode()
            for head in self.heads
            if head.startswith(request_line)
            for line in head.split(b"\r\n")
            if line.lower().startswith(prefix)
        ]


def _read_message(stream: Any) -> bytes | None:
    """One HTTP/1.1 message with a Content-Length body (all Relay and httpx send), or None
    at the end of the connection."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = stream.readline()
        if not line:
            return None
        head += line
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + stream.read(length)


@contextlib.contextmanager
def cutting_proxy(
    upstream_port: int, cert: Path, key: Path, *, cut_first: bytes
) -> Iterator[CuttingProxy]:
    listener = socket.create_server(("127.0.0.1", 0))
    proxy = CuttingProxy(upstream_port, cert, key, cut_first, port=listener.getsockname()[1])
    thread = threading.Thread(target=proxy.serve, args=(listener,), daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        # shutdown() is what wakes the blocked accept(); close() alone may not.
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=5)
