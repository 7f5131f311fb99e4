"""Webhook deliveries per second: Relay's delivery loop draining a backlog into a local receiver.

Writes `--events` pending `message.delivered` events for one account straight
into Relay's database (through Relay's own event store, as a send would), then
starts `relay serve`, whose webhook loop signs each event and POSTs it over
HTTPS to bench/webhook_sink.py, a receiver in a process of its own. The rate is
the events received divided by the time from the first to the last one (the
sink's clocks). Nothing else runs: no API requests, no SMS, so the figure is
the delivery loop's own ceiling (claim, sign, POST, record).

The floor, in the same run and against the same receiver: a bare httpx client
in this process posting the same event bodies, each signed afresh like
Relay's, with as many posts in flight as Relay allows one endpoint
(RELAY_WEBHOOK_ENDPOINT_CONCURRENCY). It runs before and after Relay, each
time to a path of its own; the ratio is Relay's rate over the mean of the two.
A second floor, for information: a bare aiohttp client (the library Relay's
transport is built on) posting the same way, also before and after Relay.

Usage:
  .venv/bin/python bench/webhook_bench.py [--events 5000] [--db sqlite|pg [--workers 2]]
  .venv/bin/python bench/webhook_bench.py --smoke     # 200 events, for CI
  .venv/bin/python bench/webhook_bench.py --json      # the figures as one JSON line
bench/run_all.py calls `measure()` and reads the figures as data.
PostgreSQL: RELAY_BENCH_WEBHOOKS_PG, default
postgresql://127.0.0.1:5432/relay_bench_webhooks (dropped and created again).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.serving import bench_account, server_cpu_seconds  # noqa: E402
from bench.smpp_bench import RELAY, recreate_pg, relay_process, sink  # noqa: E402

from relay.config import Settings  # noqa: E402
from relay.db.driver import open_db  # noqa: E402
from relay.db.sql import Tx  # noqa: E402
from relay.events import store as event_store  # noqa: E402
from relay.events.models import EventType, NewEvent  # noqa: E402
from relay.ids import new_id  # noqa: E402
from relay.tls import CertificatePaths, ensure_self_signed  # noqa: E402
from relay.webhooks.signature import HEADER, sign  # noqa: E402

PG_URL = os.environ.get(
    "RELAY_BENCH_WEBHOOKS_PG", "postgresql://127.0.0.1:5432/relay_bench_webhooks"
)
BATCH = 500


def backlog(settings: Settings, account_id: str, hook: str, events: int) -> list[bytes]:
    """`events` deliverable events, written in batches through the event store; their bodies."""
    bodies: list[bytes] = []

    def payload(number: int) -> dict[str, object]:
        return {"id": f"msg_bench{number:08d}", "object": "message", "status": "delivered"}

    async def write() -> None:
        db = open_db(settings.resolved_database_url)
        try:
            for start in range(0, events, BATCH):
                now = datetime.now(UTC)
                batch = [
                    NewEvent(
                        id=new_id("evt"),
                        type=EventType.MESSAGE_DELIVERED,
                        created_at=now,
                        livemode=True,
                        data_object=payload(number),
                    )
                    for number in range(start, min(start + BATCH, events))
                ]
                # The bytes Relay sends: the envelope as the event store keeps it.
                bodies.extend(orjson.dumps(event.envelope()) for event in batch)

                async def insert(tx: Tx, batch: list[NewEvent] = batch) -> None:
                    for event in batch:
                        await event_store.record(
                            tx,
                            event,
                            account_id=account_id,
                            related_id=str(event.data_object["id"]),
                            webhook_url=hook,
                        )

                await db.write(insert)
        finally:
            await db.close()

    asyncio.run(write())
    return bodies


def path_stats(url: str, cert: CertificatePaths, path: str) -> tuple[int, float, float]:
    """Events received on `path`, and the sink's clock at the first and the last."""
    context = ssl.create_default_context(cafile=str(cert.cert))
    body = httpx.get(f"{url}/stats", verify=context).json()
    stats = body["paths"].get(path, {"count": 0, "first": 0.0, "last": 0.0})
    return int(stats["count"]), float(stats["first"]), float(stats["last"])


def rate(count: int, first: float, last: float) -> float:
    return (count - 1) / (last - first) if count > 1 and last > first else 0.0


Sign = Callable[[bytes], dict[str, str]]
Posts = Callable[[str, ssl.SSLContext, list[bytes], Sign, int], Awaitable[None]]


def floor(
    sink_url: str,
    path: str,
    cert: CertificatePaths,
    bodies: list[bytes],
    secret: str,
    width: int,
    client: str = "httpx",
) -> tuple[float, float]:
    """A bare `client` posting the same bodies, signed afresh, `width` at a time.

    Its rate, and its CPU µs per delivery.
    """

    def headers(body: bytes) -> dict[str, str]:
        stamp = int(time.time())
        return {"Content-Type": "application/json", HEADER: sign(body, [secret], timestamp=stamp)}

    posts: Posts = _aiohttp_posts if client == "aiohttp" else _httpx_posts
    context = ssl.create_default_context(cafile=str(cert.cert))
    # The same event loop as `relay serve` (uvicorn runs uvloop when installed).
    used = time.process_time()
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(posts(f"{sink_url}{path}", context, bodies, headers, width))
    used = time.process_time() - used
    return rate(*path_stats(sink_url, cert, path)), used / len(bodies) * 1e6


async def _httpx_posts(
    url: str, context: ssl.SSLContext, bodies: list[bytes], headers: Sign, width: int
) -> None:
    limits = httpx.Limits(max_connections=width, max_keepalive_connections=width)
    pending = iter(bodies)
    async with httpx.AsyncClient(verify=context, limits=limits, timeout=30) as client:

        async def sender() -> None:
            for body in pending:
                answer = await client.post(url, content=body, headers=headers(body))
                answer.raise_for_status()

        await asyncio.gather(*(sender() for _ in range(width)))


async def _aiohttp_posts(
    url: str, context: ssl.SSLContext, bodies: list[bytes], headers: Sign, width: int
) -> None:
    connector = aiohttp.TCPConnector(ssl=context, limit=width)
    timeout = aiohttp.ClientTimeout(total=30)
    pending = iter(bodies)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

        async def sender() -> None:
            for body in pending:
                async with client.post(url, data=body, headers=headers(body)) as answer:
                    await answer.read()
                    answer.raise_for_status()

        await asyncio.gather(*(sender() for _ in range(width)))


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


@dataclass(frozen=True)
class WebhookFigures:
    db: str
    processes: int
    events: int
    received: int
    width: int
    relay_per_s: float
    floor_per_s: tuple[float, float]  # before and after Relay's run
    # CPU per delivery of the sending process(es): what a delivery costs the
    # sender, whatever the receiver (which limits the rate on two cores) takes.
    relay_cpu_us: float
    floor_cpu_us: tuple[float, float]
    # The informational second floor: a bare aiohttp client, before and after.
    aiohttp_floor_per_s: tuple[float, float]
    aiohttp_floor_cpu_us: tuple[float, float]

    @property
    def floor_mean(self) -> float:
        return sum(self.floor_per_s) / len(self.floor_per_s)

    @property
    def ratio(self) -> float:
        return self.relay_per_s / self.floor_mean if self.floor_mean else 0.0

    @property
    def aiohttp_floor_mean(self) -> float:
        return sum(self.aiohttp_floor_per_s) / len(self.aiohttp_floor_per_s)

    @property
    def aiohttp_ratio(self) -> float:
        mean = self.aiohttp_floor_mean
        return self.relay_per_s / mean if mean else 0.0


def measure(
    events: int = 5000, db: str = "sqlite", workers: int = 1, width: int | None = None
) -> WebhookFigures:
    """One run: the floors, Relay draining the same events, the floors again."""
    width = width or Settings().webhook_endpoint_concurrency
    with tempfile.TemporaryDirectory() as tmp:
        return _measure(Path(tmp), events, db, workers, width)


def _measure(work: Path, events: int, db: str, workers: int, width: int) -> WebhookFigures:
    data = work / "relay"
    data.mkdir()
    database_url = PG_URL if db == "pg" else f"sqlite:///{data / 'relay.sqlite3'}"
    if db == "pg":
        recreate_pg(database_url)
    hook_cert = ensure_self_signed(work / "sink-tls")
    env = {
        **os.environ,
        "RELAY_DATA_DIR": str(data),
        "RELAY_DATABASE_URL": database_url,
        "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "RELAY_WEBHOOK_CA_BUNDLE": str(hook_cert.cert),
        "RELAY_WEBHOOK_ENDPOINT_CONCURRENCY": str(width),
        "RELAY_LOG_LEVEL": "warning",
    }
    account = bench_account(RELAY, env)
    settings = Settings(data_dir=data, database_url=database_url)
    with sink(hook_cert) as sink_url:
        bodies = backlog(settings, account["id"], f"{sink_url}/relay", events)
        secret = account["live_webhook_secret"]  # the backlog is live events
        before, before_cpu = floor(sink_url, "/floor-1", hook_cert, bodies, secret, width)
        aio_before = floor(sink_url, "/aiohttp-1", hook_cert, bodies, secret, width, "aiohttp")
        with relay_process(env, data, workers) as (_url, pid):
            used = server_cpu_seconds(pid)
            deadline = time.monotonic() + max(120.0, events / 10)
            count, first, last = path_stats(sink_url, hook_cert, "/relay")
            while count < events and time.monotonic() < deadline:
                time.sleep(0.1)
                count, first, last = path_stats(sink_url, hook_cert, "/relay")
            used = server_cpu_seconds(pid) - used
        after, after_cpu = floor(sink_url, "/floor-2", hook_cert, bodies, secret, width)
        aio_after = floor(sink_url, "/aiohttp-2", hook_cert, bodies, secret, width, "aiohttp")
    return WebhookFigures(
        db,
        workers,
        events,
        count,
        width,
        rate(count, first, last),
        (before, after),
        used / max(count, 1) * 1e6,
        (before_cpu, after_cpu),
        (aio_before[0], aio_after[0]),
        (aio_before[1], aio_after[1]),
    )


def report(figures: WebhookFigures) -> None:
    processes = f"{figures.processes} process(es)" if figures.db == "pg" else "1 process"
    print(
        f"Webhook deliveries to a local HTTPS receiver, {figures.db}, {processes}, "
        f"{figures.width} at a time to the one endpoint"
    )
    before, after = figures.floor_per_s
    print("| measure | value |")
    print("|---|---|")
    print(f"| events written before start | {figures.events:,} |")
    print(f"| received from Relay | {figures.received:,} |")
    print(f"| Relay: deliveries per second (first to last received) | {figures.relay_per_s:,.0f} |")
    print(f"| floor, bare httpx client: before / after Relay | {before:,.0f} / {after:,.0f} |")
    print(f"| Relay / floor | {figures.ratio:.2f}x |")
    floor_cpu = " / ".join(f"{cpu:,.0f}" for cpu in figures.floor_cpu_us)
    relay_cpu = f"{figures.relay_cpu_us:,.0f}"
    print(f"| sender CPU µs per delivery: Relay; floor before / after | {relay_cpu}; {floor_cpu} |")
    aio_before, aio_after = figures.aiohttp_floor_per_s
    aio_cpu = " / ".join(f"{cpu:,.0f}" for cpu in figures.aiohttp_floor_cpu_us)
    aio_rates = f"{aio_before:,.0f} / {aio_after:,.0f}"
    print(f"| second floor, bare aiohttp client: before / after | {aio_rates} |")
    print(f"| Relay / aiohttp floor | {figures.aiohttp_ratio:.2f}x |")
    print(f"| aiohttp floor CPU µs per delivery: before / after | {aio_cpu} |")
    if figures.received < figures.events:
        raise SystemExit(f"only {figures.received} of {figures.events} events arrived")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--workers", type=int, default=1, help="relay serve --workers (pg only)")
    parser.add_argument(
        "--width", type=int, help="posts in flight (default: RELAY_WEBHOOK_ENDPOINT_CONCURRENCY)"
    )
    parser.add_argument("--smoke", action="store_true", help="200 events, for CI")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    if args.smoke:
        args.events = 200
    if args.db == "sqlite" and args.workers != 1:
        raise SystemExit("SQLite is served by one process; use --db pg for --workers > 1")
    figures = measure(args.events, args.db, args.workers, args.width)
    if args.json:
        print(
            json.dumps(
                {**asdict(figures), "ratio": figures.ratio, "aiohttp_ratio": figures.aiohttp_ratio}
            )
        )
    else:
        report(figures)


if __name__ == "__main__":
    main()
