"""Jasmin 0.11.0 beside Relay's Send API: delivered receipts per second on the same SMSC.

Jasmin (`jasmin` on PyPI) is the SMS gateway Python users pick. This starts the
SMPP peer of the carrier tests (`tests/carriers/smpp_peer_node`, answering
every submit with a DELIVRD receipt), then jasmind (bench/jasmin_stack.py:
installed from PyPI into the bench cache, a RabbitMQ vhost and a redis-server
of its own) with one SMPP connector bound to the peer, and a small HTTP server
that takes Jasmin's receipt callbacks (`dlr-url`, `dlr-level=2`) and answers
`ACK/Jasmin`. N messages go in through Jasmin's HTTP API (`/send`),
concurrently. The figure is delivered receipts per second from the first
submit to the last receipt callback, as for Kannel (bench/kannel_reference.py).
Then, in the same run, Relay's Send API end to end on the same SMSC
(bench/smpp_bench.py: `POST /v1/messages` with a live key, SQLite, 1 process,
receipts counted by their `message.delivered` webhooks).

Usage:
  .venv/bin/python bench/jasmin_reference.py [--messages 3000] [--concurrency 64] [--json]
                                             [--connectors 1] [--tcp-nodelay]
  .venv/bin/python bench/jasmin_reference.py --smoke          # a few hundred messages
  .venv/bin/python bench/jasmin_reference.py --jasmin-only    # without Relay's side

Needs RabbitMQ on 127.0.0.1:5672 (guest/guest, rabbitmqctl for the vhost),
redis-server, Node.js with npm, and wrk for Relay's side. Where RabbitMQ or
Redis is missing, or Jasmin does not install, it prints `skipped: why` and exits 0.

From another bench (same machine, same run):
  from bench.jasmin_reference import run_jasmin, unavailable
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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.jasmin_stack import (  # noqa: E402
    PASSWORD,
    USERNAME,
    VERSION,
    JasminOptions,
    JasminUnavailable,
    ensure_jasmin,
    missing,
    start_jasmin,
)
from bench.kannel_boxes import close_server, install_peer_once, start_peer  # noqa: E402
from bench.kannel_reference import KeepAliveClient  # noqa: E402
from bench.receipt_sink import ReceiptSink  # noqa: E402

# A run fails once no receipt has arrived for this long (Jasmin logs what it drops).
_STALL_TIMEOUT = 30.0


@dataclass(frozen=True)
class JasminResult:
    messages: int
    delivered: int
    seconds: float
    receipts_per_second: float
    # Between the 10th and the 90th percentile receipt: without start-up and the tail.
    steady_receipts_per_second: float
    concurrency: int
    connectors: int
    tcp_nodelay: bool
    submit_seconds: float
    # Receipts Jasmin looked up before it had stored their message's id, retried later.
    early_receipts: int
    # Receipts Jasmin gave up on: still unmatched after its last lookup retry.
    dropped_receipts: int
    dlr_retry_delay: int
    dlr_max_retries: int
    log_level: str
    version: str


def unavailable() -> str | None:
    """Why Jasmin cannot be measured here (prerequisites, or its install), or None."""
    reason = missing()
    if reason is None:
        try:
            ensure_jasmin()
        except (JasminUnavailable, OSError, TimeoutError) as error:
            reason = f"Jasmin {VERSION} did not install: {error}"
    return reason


async def run_jasmin(messages: int, options: JasminOptions | None = None) -> JasminResult:
    """One full run: peer, Jasmin and the receipt sink, all stopped on return."""
    options = options or JasminOptions()
    peer_dir = await asyncio.to_thread(install_peer_once)
    with tempfile.TemporaryDirectory(prefix="jasmin-bench-") as tmp:
        work = Path(tmp)
        sink = receipt_sink()
        log = ReceiptLog(work / "log" / "messages.log")
        async with contextlib.AsyncExitStack() as stack:
            server = await asyncio.start_server(sink.handle, "127.0.0.1", 0)
            stack.push_async_callback(close_server, server)
            sink_port = server.sockets[0].getsockname()[1]
            try:
                peer_port = await start_peer(stack, peer_dir, work)
                http_port = await start_jasmin(stack, work, peer_port, options)
                seconds, submit_seconds = await _drive(
                    sink, http_port, sink_port, messages, options.concurrency, log.dropped
                )
            except Exception:
                print_logs(work)
                raise
            early, dropped = log.early(), log.dropped()
    return JasminResult(
        messages=messages,
        delivered=len(sink.delivered),
        seconds=seconds,
        receipts_per_second=len(sink.delivered) / seconds,
        steady_receipts_per_second=sink.steady_rate(),
        concurrency=options.concurrency,
        connectors=options.connectors,
        tcp_nodelay=options.tcp_nodelay,
        submit_seconds=submit_seconds,
        early_receipts=early,
        dropped_receipts=dropped,
        dlr_retry_delay=options.dlr_retry_delay,
        dlr_max_retries=options.dlr_max_retries,
        log_level=options.log_level,
        version=VERSION,
    )


def receipt_sink() -> ReceiptSink:
    """Jasmin retries a callback whose answer is not `ACK/Jasmin`."""
    return ReceiptSink(_delivered, answer=b"ACK/Jasmin")


def _delivered(query: dict[str, list[str]]) -> str | None:
    """Jasmin's receipt: the message's id when its status is DELIVRD."""
    return query["id"][0] if query.get("message_status") == ["DELIVRD"] else None


class ReceiptLog:
    """What Jasmin's DLR lookup logged (messages.log): misses retried, and receipts dropped."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _count(self, word: str) -> int:
        if not self.path.is_file():
            return 0
        with self.path.open(errors="replace") as lines:
            return sum(word in line for line in lines)

    def early(self) -> int:
        return self._count("DLRMapNotFound")

    def dropped(self) -> int:
        return self._count("(final) DLRMapNotFound")


async def _drive(
    sink: ReceiptSink,
    http_port: int,
    sink_port: int,
    messages: int,
    concurrency: int,
    dropped: Callable[[], int],
) -> tuple[float, float]:
    """Seconds from the first submit to the last receipt, and to the last /send answer."""
    pending = iter(range(messages))
    clients = [KeepAliveClient("127.0.0.1", http_port) for _ in range(concurrency)]
    accepted: set[str] = set()

    async def sender(client: KeepAliveClient) -> None:
        for index in pending:
            status, body = await client.get(_send_target(index, sink_port))
            if status != 200 or not body.startswith(b'Success "'):
                raise RuntimeError(f"Jasmin's /send answered {status}: {body!r}")
            accepted.add(body.decode().split('"')[1])

    try:
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
    # Until every receipt is in, or Jasmin has logged giving up on the rest.
    while len(sink.delivered) < messages:
        sink.progress.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await sink.progress.wait()
                continue
        if len(sink.delivered) + dropped() >= messages:
            break
        if time.perf_counter() - max(sink.last_at, submitted) > _STALL_TIMEOUT:
            raise RuntimeError(
                f"only {len(sink.delivered)} of {messages} receipts after {_STALL_TIMEOUT:.0f}s"
                f" without progress ({sink.other} other callbacks, {dropped()} dropped)"
            )
    if strangers := sink.delivered - accepted:
        raise RuntimeError(f"receipts for {len(strangers)} ids /send never returned")
    return sink.last_at - started, submitted - started


def _send_target(index: int, sink_port: int) -> str:
    params = {
        "username": USERNAME,
        "password": PASSWORD,
        "from": "Relay",
        "to": f"+1555{index % 10_000_000:07d}",
        "content": f"Your code is {index % 1_000_000:06d}",
        "dlr": "yes",
        "dlr-url": f"http://127.0.0.1:{sink_port}/dlr",
        # 2: the SMSC's receipt (1 would be Jasmin's own acknowledgement of the submit).
        "dlr-level": "2",
        "dlr-method": "GET",
    }
    return f"/send?{urlencode(params)}"


def print_logs(work: Path) -> None:
    for path in [work / "jasmind.out", work / "redis.out", *sorted((work / "log").glob("*.log"))]:
        if path.is_file() and path.stat().st_size:
            tail = path.read_text(errors="replace").splitlines()[-15:]
            print(f"--- {path.name} (last lines)", *tail, sep="\n", file=sys.stderr)


def relay_send_api(smoke: bool) -> float:
    """Relay's Send API end to end on the SMSC (bench/smpp_bench.py, SQLite, 1 process)."""
    from bench import smpp_bench

    args = smpp_bench.parse(["--api", "messages", *(["--smoke"] if smoke else [])])
    outcome = smpp_bench.run(args)
    smpp_bench.report(args, outcome, None)
    return outcome.end_to_end_rps


def _on_sigterm(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64, help="/send requests in flight")
    parser.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING"], help="Jasmin's"
    )
    parser.add_argument(
        "--dlr-retry-delay", type=int, default=1, help="seconds before a missed DLR lookup retries"
    )
    parser.add_argument(
        "--dlr-max-retries", type=int, default=10, help="DLR lookups in all, the first included"
    )
    parser.add_argument("--connectors", type=int, default=1, help="SMPP binds to the SMSC")
    parser.add_argument(
        "--tcp-nodelay", action="store_true", help="not stock: TCP_NODELAY on jasmind's sockets"
    )
    parser.add_argument("--jasmin-only", action="store_true", help="leave out Relay's side")
    parser.add_argument("--smoke", action="store_true", help="300 messages, a few seconds")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    if args.smoke:
        args.messages = 300
    reason = unavailable()
    if reason is not None:
        print(f"skipped: {reason}")
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    options = JasminOptions(
        concurrency=args.concurrency,
        log_level=args.log_level,
        dlr_retry_delay=args.dlr_retry_delay,
        dlr_max_retries=args.dlr_max_retries,
        connectors=args.connectors,
        tcp_nodelay=args.tcp_nodelay,
    )
    try:
        result = asyncio.run(run_jasmin(args.messages, options))
        relay = None if args.jasmin_only else relay_send_api(args.smoke)
    except JasminUnavailable as error:  # another jasmind runs on this machine
        print(f"skipped: {error}")
        return
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    report(result, relay, as_json=args.json)


def report(result: JasminResult, relay: float | None, *, as_json: bool) -> None:
    ratio = None if relay is None else relay / result.receipts_per_second
    if as_json:
        figures = {"relay_msgs_per_s": relay, "relay_jasmin_ratio": ratio}
        print(json.dumps({"server": "jasmin", **asdict(result), **figures}))
        return
    binds = "one SMPP connector" if result.connectors == 1 else f"{result.connectors} connectors"
    patched = ", TCP_NODELAY patched in (not stock)" if result.tcp_nodelay else ""
    print(
        f"\nJasmin {result.version} (HTTP API, {binds}, submit_throughput 0{patched}), "
        f"{result.concurrency} /send requests in flight, log level {result.log_level}, "
        f"DLR lookups every {result.dlr_retry_delay} s, {result.dlr_max_retries} at most"
    )
    print("| measure | value |\n|---|---|")
    rows = [
        ("messages sent / receipts delivered", f"{result.messages} / {result.delivered}"),
        ("Jasmin: first /send to last receipt", f"{result.receipts_per_second:,.0f} receipts/s"),
        ("Jasmin: 10th to 90th percentile receipt", f"{result.steady_receipts_per_second:,.0f}/s"),
        ("Jasmin: every /send answered after", f"{result.submit_seconds:.2f} s"),
        ("receipts looked up before their id was stored", str(result.early_receipts)),
        ("receipts Jasmin dropped after its last retry", str(result.dropped_receipts)),
    ]
    if relay is not None and ratio is not None:
        rows.append(("Relay Send API end to end, SQLite 1 process", f"{relay:,.0f} msg/s"))
        rows.append(("Relay / Jasmin", f"{ratio:.2f}x"))
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
