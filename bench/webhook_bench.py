"""Webhook deliveries per second: Relay's delivery loop draining a backlog into a local receiver.

Writes `--events` pending `message.delivered` events for one account straight
into Relay's database (through Relay's own event store, as a send would), then
starts `relay serve`, whose webhook loop signs each event and POSTs it over
HTTPS to bench/webhook_sink.py, a receiver in a process of its own. The rate is
the events received divided by the time from the first to the last one (the
sink's clocks). Nothing else runs: no API requests, no SMS, so the figure is
the delivery loop's own ceiling (claim, sign, POST, record).

Usage:
  .venv/bin/python bench/webhook_bench.py [--events 5000] [--db sqlite|pg [--workers 2]]
  .venv/bin/python bench/webhook_bench.py --smoke     # 200 events, for CI
PostgreSQL: RELAY_BENCH_WEBHOOKS_PG, default
postgresql://127.0.0.1:5432/relay_bench_webhooks (dropped and created again).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from sqlalchemy import Connection

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.smpp_bench import RELAY, recreate_pg, relay_serving, sink  # noqa: E402
from bench.verify_bench import bench_account  # noqa: E402

from relay.config import Settings  # noqa: E402
from relay.db.engine import open_database  # noqa: E402
from relay.events import store as event_store  # noqa: E402
from relay.events.models import EventType, NewEvent  # noqa: E402
from relay.ids import new_id  # noqa: E402
from relay.tls import CertificatePaths, ensure_self_signed  # noqa: E402

PG_URL = os.environ.get(
    "RELAY_BENCH_WEBHOOKS_PG", "postgresql://127.0.0.1:5432/relay_bench_webhooks"
)
BATCH = 500


def backlog(settings: Settings, account_id: str, hook: str, events: int) -> None:
    """`events` deliverable events, written in batches through the event store."""

    def payload(number: int) -> dict[str, object]:
        return {"id": f"msg_bench{number:08d}", "object": "message", "status": "delivered"}

    async def write() -> None:
        db = open_database(settings.resolved_database_url)
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

                def insert(conn: Connection, batch: list[NewEvent] = batch) -> None:
                    for event in batch:
                        event_store.record(
                            conn,
                            event,
                            account_id=account_id,
                            related_id=str(event.data_object["id"]),
                            webhook_url=hook,
                        )

                await db.write(insert)
        finally:
            await db.close()

    asyncio.run(write())


def received(url: str, cert: CertificatePaths) -> tuple[int, float, float]:
    context = ssl.create_default_context(cafile=str(cert.cert))
    body = httpx.get(f"{url}/stats", verify=context).json()
    return int(body["counts"].get("message.delivered", 0)), body["first"], body["last"]


def run(args: argparse.Namespace, work: Path) -> None:
    data = work / "relay"
    data.mkdir()
    database_url = PG_URL if args.db == "pg" else f"sqlite:///{data / 'relay.sqlite3'}"
    if args.db == "pg":
        recreate_pg(database_url)
    hook_cert = ensure_self_signed(work / "sink-tls")
    env = {
        **os.environ,
        "RELAY_DATA_DIR": str(data),
        "RELAY_DATABASE_URL": database_url,
        "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "RELAY_WEBHOOK_CA_BUNDLE": str(hook_cert.cert),
        "RELAY_LOG_LEVEL": "warning",
    }
    account = bench_account(RELAY, env)
    settings = Settings(data_dir=data, database_url=database_url)
    with sink(hook_cert) as sink_url:
        backlog(settings, account["id"], f"{sink_url}/hook", args.events)
        with relay_serving(env, data, args.workers):
            deadline = time.monotonic() + max(120.0, args.events / 10)
            count, first, last = received(sink_url, hook_cert)
            while count < args.events and time.monotonic() < deadline:
                time.sleep(0.2)
                count, first, last = received(sink_url, hook_cert)
    rate = (count - 1) / (last - first) if count > 1 and last > first else 0.0
    processes = f"{args.workers} process(es)" if args.db == "pg" else "1 process"
    print(f"Webhook deliveries to a local HTTPS receiver, {args.db}, {processes}")
    print("| measure | value |")
    print("|---|---|")
    print(f"| events written before start | {args.events:,} |")
    print(f"| received | {count:,} |")
    print(f"| deliveries per second (first to last received) | {rate:,.0f} |")
    if count < args.events:
        raise SystemExit(f"only {count} of {args.events} events arrived before the deadline")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--workers", type=int, default=1, help="relay serve --workers (pg only)")
    parser.add_argument("--smoke", action="store_true", help="200 events, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.events = 200
    if args.db == "sqlite" and args.workers != 1:
        raise SystemExit("SQLite is served by one process; use --db pg for --workers > 1")
    with tempfile.TemporaryDirectory() as tmp:
        run(args, Path(tmp))


if __name__ == "__main__":
    main()
