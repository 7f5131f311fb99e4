"""Kannel 1.4.5 as the side-by-side reference: SMPP delivery receipts per second.

Starts the SMPP peer of the carrier tests (`tests/carriers/smpp_peer_node`, the npm
`smpp` server, answering every submit with a DELIVRD receipt), then Kannel's
bearerbox and smsbox bound to it as one transceiver, and a small HTTP server that
receives Kannel's delivery-report callbacks (`dlr-url`, `dlr-mask=3`). N messages
go in through smsbox's sendsms interface, concurrently. The figure is delivered
receipts per second from the first submit to the last receipt callback.

Usage:
  .venv/bin/python bench/kannel_reference.py [--messages 20000] [--window 10] [--json]
  .venv/bin/python bench/kannel_reference.py --smoke     # a few hundred messages
  .venv/bin/python bench/kannel_reference.py --install   # apt-get install kannel first

From another bench (same machine, same run):
  from kannel_reference import measure_kannel          # bench/ on sys.path
  receipts_per_second = measure_kannel(20_000)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = Path(__file__).resolve().parent / "kannel" / "kannel.conf.template"
INSTALL_COMMAND = ["apt-get", "install", "-y", "kannel"]
# Debian puts the boxes in /usr/sbin, which a non-root PATH often lacks.
_SBIN = ("/usr/sbin", "/usr/local/sbin")
_PEER_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "relay-bench"
_START_TIMEOUT = 30.0
# A run fails once no receipt has arrived for this long: Kannel only logs lost DLRs.
_STALL_TIMEOUT = 30.0
_SENDSMS_PASSWORD = secrets.token_hex(8)


@dataclass(frozen=True)
class KannelResult:
    messages: int
    delivered: int
    seconds: float
    receipts_per_second: float
    # Between the 10th and the 90th percentile receipt: without start-up and the
    # tail, where Kannel sometimes holds the last few dozen messages for up to 1 s.
    steady_receipts_per_second: float
    window: int
    concurrency: int
    submit_seconds: float
    log_level: int
    store: str
    version: str


class KannelMissing(RuntimeError):
    pass


def find_boxes() -> tuple[str, str] | None:
    """Paths of bearerbox and smsbox, or None when Kannel is not installed."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    bearerbox, smsbox = shutil.which("bearerbox", path=path), shutil.which("smsbox", path=path)
    return (bearerbox, smsbox) if bearerbox and smsbox else None


def install_kannel() -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=True, env=env)
    subprocess.run(INSTALL_COMMAND, check=True, env=env)


def kannel_version() -> str:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "kannel"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"


@dataclass(frozen=True)
class KannelOptions:
    window: int = 10  # max-pending-submits, as Relay's SmppSettings.window
    concurrency: int = 64  # sendsms requests in flight
    log_level: int = 2
    store: str = "none"  # or "file" / "spool": bearerbox's message store


def measure_kannel(messages: int, options: KannelOptions | None = None) -> float:
    """Kannel's delivered receipts per second for `messages` messages (blocking)."""
    return asyncio.run(run_kannel(messages, options)).receipts_per_second


async def run_kannel(messages: int, options: KannelOptions | None = None) -> KannelResult:
    """One full run: peer, bearerbox, smsbox and the receipt sink, all stopped on return."""
    options = options or KannelOptions()
    boxes = find_boxes()
    if boxes is None:
        raise KannelMissing(f"Kannel is not installed: {' '.join(INSTALL_COMMAND)}")
    peer_dir = await asyncio.to_thread(_install_peer)
    with tempfile.TemporaryDirectory(prefix="kannel-bench-") as tmp:
        work = Path(tmp)
        sink = ReceiptSink()
        async with contextlib.AsyncExitStack() as stack:
            server = await asyncio.start_server(sink.handle, "127.0.0.1", 0)
            stack.push_async_callback(_close_server, server)
            sink_port = server.sockets[0].getsockname()[1]
            try:
                peer_port = await _start_peer(stack, peer_dir, work)
                sendsms_port = await _start_kannel(stack, boxes, work, peer_port, options)
                seconds, submit_seconds = await _drive(
                    sink, sendsms_port, sink_port, messages, options.concurrency
                )
            except Exception:
                _print_logs(work)
                raise
    return KannelResult(
        messages=messages,
        delivered=len(sink.delivered),
        seconds=seconds,
        receipts_per_second=len(sink.delivered) / seconds,
        steady_receipts_per_second=sink.steady_rate(),
        window=options.window,
        concurrency=options.concurrency,
        submit_seconds=submit_seconds,
        log_level=options.log_level,
        store=options.store,
        version=kannel_version(),
    )


class ReceiptSink:
    """The dlr-url target: a minimal keep-alive HTTP/1.1 server counting DELIVRD callbacks."""

    def __init__(self) -> None:
        self.delivered: set[int] = set()
        self.delivered_at: list[float] = []
        self.other = 0
        self.last_at = 0.0
        self.progress = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                length = 0
                for line in header_lines:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                if length:
                    await reader.readexactly(length)
                self._record(request_line.split(" ")[1])
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _record(self, target: str) -> None:
        query = parse_qs(urlsplit(target).query)
        # Kannel's %d: 1 is delivered to the phone; 2 failed, 4/8/16 are intermediate.
        if query.get("type") == ["1"]:
            index = int(query["n"][0])
            if index not in self.delivered:
                self.delivered.add(index)
                self.last_at = time.perf_counter()
                self.delivered_at.append(self.last_at)
        else:
            self.other += 1
        self.progress.set()

    def steady_rate(self) -> float:
        count = len(self.delivered_at)
        low, high = count // 10, count * 9 // 10
        if high - low < 2:
            return float("nan")
        return (high - low) / (self.delivered_at[high] - self.delivered_at[low])


async def _drive(
    sink: ReceiptSink, sendsms_port: int, sink_port: int, messages: int, concurrency: int
) -> tuple[float, float]:
    """Seconds from the first submit to the last receipt, and to the last sendsms answer."""
    pending = iter(range(messages))
    clients = [_KeepAliveClient("127.0.0.1", sendsms_port) for _ in range(concurrency)]

    async def sender(client: _KeepAliveClient) -> None:
        for index in pending:
            status, body = await client.get(_sendsms_target(index, sink_port))
            if status != 202:
                raise RuntimeError(f"sendsms answered {status}: {body!r}")

    try:
        # Connected before the clock starts: smsbox's small listen backlog drops
        # SYNs from a burst of connects, and the 1 s SYN retry is not Kannel's speed.
        async with asyncio.TaskGroup() as group:
            for client in clients:
                group.create_task(client.connect())
        started = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for client in clients:
                group.create_task(sender(client))
        submitted = time.perf_counter()
    finally:
        for client in clients:
            await client.close()
    while len(sink.delivered) < messages:
        sink.progress.clear()
        try:
            async with asyncio.timeout(_STALL_TIMEOUT):
                await sink.progress.wait()
        except TimeoutError:
            raise RuntimeError(
                f"only {len(sink.delivered)} of {messages} receipts after {_STALL_TIMEOUT:.0f}s"
                f" without progress ({sink.other} non-delivered callbacks)"
            ) from None
    return sink.last_at - started, submitted - started


def _sendsms_target(index: int, sink_port: int) -> str:
    # Kannel expands %d in the callback; `n` tells the sink which message it was.
    dlr_url = f"http://127.0.0.1:{sink_port}/dlr?n={index}&type=%d"
    params = {
        "username": "bench",
        "password": _SENDSMS_PASSWORD,
        "from": "Relay",
        "to": f"+1555{index % 10_000_000:07d}",
        "text": f"Your code is {index % 1_000_000:06d}",
        "dlr-mask": "3",
        "dlr-url": dlr_url,
    }
    return f"/cgi-bin/sendsms?{urlencode(params)}"


class _KeepAliveClient:
    """One HTTP/1.1 connection, reopened when the server closes it.

    With httpx (pool bookkeeping, milliseconds of CPU per call) this process, not
    Kannel, was the limit: about 180 receipts/s instead of about 3,000.
    """

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def connect(self) -> None:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self._host, self._port)

    async def get(self, target: str) -> tuple[int, bytes]:
        await self.connect()
        assert self._streams is not None
        reader, writer = self._streams
        writer.write(f"GET {target} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close" or status_line.startswith("HTTP/1.0"):
            await self.close()
        return int(status_line.split(" ")[1]), body

    async def close(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def _install_peer() -> Path:
    # One pinned install shared with the carrier tests' logic (npm ci, cached by lockfile).
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.carriers.smpp_peer import install_peer

    return Path(install_peer(_PEER_CACHE))


async def _start_peer(stack: contextlib.AsyncExitStack, peer_dir: Path, work: Path) -> int:
    config = {"receipt": {"stat": "DELIVRD", "form": "text"}}
    # The peer reports every PDU on stdout; a file takes that without a reader in this
    # process competing with Kannel for the two cores.
    log = work / "peer.jsonl"
    with log.open("wb") as out:
        process = await _spawn(
            stack, ["node", str(peer_dir / "peer.js"), json.dumps(config)], peer_dir, out
        )
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"the SMPP peer exited: {log.read_text()}")
        with log.open() as lines:
            for line in lines:
                with contextlib.suppress(json.JSONDecodeError):
                    event = json.loads(line)
                    if event.get("event") == "listening":
                        return int(event["port"])
        await asyncio.sleep(0.05)
    raise RuntimeError("the SMPP peer did not start listening")


async def _start_kannel(
    stack: contextlib.AsyncExitStack,
    boxes: tuple[str, str],
    work: Path,
    peer_port: int,
    options: KannelOptions,
) -> int:
    bearerbox, smsbox = boxes
    admin_port, smsbox_port, sendsms_port = _free_port(), _free_port(), _free_port()
    admin_password = secrets.token_hex(8)
    conf = work / "kannel.conf"
    conf.write_text(
        string.Template(TEMPLATE.read_text()).substitute(
            admin_port=admin_port,
            admin_password=admin_password,
            smsbox_port=smsbox_port,
            sendsms_port=sendsms_port,
            sendsms_password=_SENDSMS_PASSWORD,
            peer_port=peer_port,
            window=options.window,
            log_dir=work,
            log_level=options.log_level,
            store=_store_lines(options.store, work),
        )
    )
    admin = f"http://127.0.0.1:{admin_port}"
    # The console has its own level (-v), debug unless told: every PDU again, on stderr.
    verbosity = ["-v", str(options.log_level)]
    with (work / "bearerbox.out").open("wb") as out:
        bearer = await _spawn(stack, [bearerbox, *verbosity, str(conf)], work, out)
    await _wait_online(admin, admin_password, [bearer], box=False)
    with (work / "smsbox.out").open("wb") as out:
        sms = await _spawn(stack, [smsbox, *verbosity, str(conf)], work, out)
    await _wait_online(admin, admin_password, [bearer, sms], box=True)
    await _wait_listening(sendsms_port)
    return sendsms_port


def _store_lines(store: str, work: Path) -> str:
    # Never an empty line: a blank line ends a Kannel config group.
    if store == "none":
        return "# no message store"
    location = work / ("store.d" if store == "spool" else "store.dat")
    if store == "spool":
        location.mkdir()
    return f'store-type = {store}\nstore-location = "{location}"'


async def _wait_online(
    admin: str, password: str, processes: list[asyncio.subprocess.Process], *, box: bool
) -> None:
    """Until the SMPP bind is up (and, with `box`, an smsbox is connected)."""
    deadline = time.monotonic() + _START_TIMEOUT
    status = ""
    async with httpx.AsyncClient(timeout=2) as client:
        while time.monotonic() < deadline:
            if any(process.returncode is not None for process in processes):
                raise RuntimeError("a Kannel box exited during start")
            with contextlib.suppress(httpx.TransportError):
                response = await client.get(f"{admin}/status.txt", params={"password": password})
                status = response.text
                online = any(
                    line.strip().startswith("peer") and "online" in line
                    for line in status.splitlines()
                )
                if online and (not box or "smsbox:" in status):
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"Kannel did not come online; last status:\n{status}")


async def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise RuntimeError(f"nothing listens on port {port}")


async def _spawn(
    stack: contextlib.AsyncExitStack, command: list[str], cwd: Path, out: IO[bytes]
) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        # A pipe that stays open: the peer takes end-of-input as its signal to exit.
        stdin=subprocess.PIPE,
        stdout=out,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    stack.push_async_callback(_stop, process)
    return process


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if process.stdin is not None:
        process.stdin.close()


def _die_with_parent() -> None:
    # Even a SIGKILLed bench leaves no bearerbox bound to the peer behind.
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


async def _close_server(server: asyncio.Server) -> None:
    server.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(2):
            await server.wait_closed()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _print_logs(work: Path) -> None:
    for name in ("bearerbox.log", "smsbox.log", "bearerbox.out", "smsbox.out"):
        path = work / name
        if path.is_file():
            tail = path.read_text(errors="replace").splitlines()[-20:]
            print(f"--- {name} (last lines)", *tail, sep="\n", file=sys.stderr)


def _on_sigterm(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=10, help="max-pending-submits")
    parser.add_argument("--concurrency", type=int, default=64, help="sendsms requests in flight")
    parser.add_argument(
        "--log-level", type=int, default=2, choices=range(6), help="Kannel log-level (0 = debug)"
    )
    parser.add_argument(
        "--store", choices=["none", "file", "spool"], default="none", help="bearerbox store-type"
    )
    parser.add_argument("--smoke", action="store_true", help="300 messages, a few seconds")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--install", action="store_true", help="apt-get install kannel if missing")
    args = parser.parse_args()
    if args.smoke:
        args.messages = 300
    if find_boxes() is None:
        if not args.install:
            print(f"Kannel is not installed; run: {' '.join(INSTALL_COMMAND)}", file=sys.stderr)
            raise SystemExit(2)
        install_kannel()
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        options = KannelOptions(args.window, args.concurrency, args.log_level, args.store)
        result = asyncio.run(run_kannel(args.messages, options))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    report(result, as_json=args.json)


def report(result: KannelResult, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"server": "kannel", **asdict(result)}))
        return
    print(
        f"Kannel {result.version}, SMPP window {result.window}, "
        f"{result.concurrency} sendsms requests in flight, "
        f"log-level {result.log_level}, store {result.store}"
    )
    print(f"{'messages':>9} {'delivered':>10} {'seconds':>8} {'receipts/s':>11} {'steady/s':>9}")
    print(
        f"{result.messages:9} {result.delivered:10} {result.seconds:8.2f} "
        f"{result.receipts_per_second:11.0f} {result.steady_receipts_per_second:9.0f}"
    )


if __name__ == "__main__":
    main()
