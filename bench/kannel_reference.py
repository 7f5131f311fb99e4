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
import json
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.kannel_boxes import (  # noqa: E402
    INSTALL_COMMAND,
    SENDSMS_PASSWORD,
    KannelMissing,
    KannelOptions,
    close_server,
    find_boxes,
    install_kannel,
    install_peer_once,
    kannel_version,
    print_logs,
    start_kannel,
    start_peer,
)
from bench.receipt_sink import ReceiptSink, read_head  # noqa: E402

# A run fails once no receipt has arrived for this long: Kannel only logs lost DLRs.
_STALL_TIMEOUT = 30.0


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


def measure_kannel(messages: int, options: KannelOptions | None = None) -> float:
    """Kannel's delivered receipts per second for `messages` messages (blocking)."""
    return asyncio.run(run_kannel(messages, options)).receipts_per_second


async def run_kannel(messages: int, options: KannelOptions | None = None) -> KannelResult:
    """One full run: peer, bearerbox, smsbox and the receipt sink, all stopped on return."""
    options = options or KannelOptions()
    boxes = find_boxes()
    if boxes is None:
        raise KannelMissing(f"Kannel is not installed: {' '.join(INSTALL_COMMAND)}")
    peer_dir = await asyncio.to_thread(install_peer_once)
    with tempfile.TemporaryDirectory(prefix="kannel-bench-") as tmp:
        work = Path(tmp)
        sink = ReceiptSink(_delivered)
        async with contextlib.AsyncExitStack() as stack:
            server = await asyncio.start_server(sink.handle, "127.0.0.1", 0)
            stack.push_async_callback(close_server, server)
            sink_port = server.sockets[0].getsockname()[1]
            try:
                peer_port = await start_peer(stack, peer_dir, work)
                sendsms_port = await start_kannel(stack, boxes, work, peer_port, options)
                seconds, submit_seconds = await _drive(
                    sink, sendsms_port, sink_port, messages, options.concurrency
                )
            except Exception:
                print_logs(work)
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


def _delivered(query: dict[str, list[str]]) -> int | None:
    """Kannel's %d: 1 is delivered to the phone; 2 failed, 4/8/16 are intermediate."""
    return int(query["n"][0]) if query.get("type") == ["1"] else None


async def _drive(
    sink: ReceiptSink, sendsms_port: int, sink_port: int, messages: int, concurrency: int
) -> tuple[float, float]:
    """Seconds from the first submit to the last receipt, and to the last sendsms answer."""
    pending = iter(range(messages))
    clients = [KeepAliveClient("127.0.0.1", sendsms_port) for _ in range(concurrency)]

    async def sender(client: KeepAliveClient) -> None:
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
        "password": SENDSMS_PASSWORD,
        "from": "Relay",
        "to": f"+1555{index % 10_000_000:07d}",
        "text": f"Your code is {index % 1_000_000:06d}",
        "dlr-mask": "3",
        "dlr-url": dlr_url,
    }
    return f"/cgi-bin/sendsms?{urlencode(params)}"


class KeepAliveClient:
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
        status_line, headers = await read_head(reader)
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await _read_chunks(reader)  # Twisted's answer (Jasmin's HTTP API)
        else:
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


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    body = b""
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        body += await reader.readexactly(size)
        await reader.readexactly(2)
    await reader.readuntil(b"\r\n")  # no trailers: the blank line after the last chunk
    return body


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
