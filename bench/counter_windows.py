"""CPU per create on a fresh database, and on one holding a day of abuse counters.

Every send reads its account's counters over the last 24 hours (the daily SMS
cap) and its country's and prefix's over the last hour (the pumping guard).
A benchmark that starts on an empty database never sees what those reads cost
once a day of traffic is behind them; this one writes that day first.

The day is written by Relay's own code (`relay.abuse.store.bump_many`), one
send's counters every `--per-step` seconds of simulated time, so the rows it
leaves are whatever the code under test writes: its bucket sizes, its shards.
Then creates run through the ASGI app in this process (as bench/in_process.py
does), one at a time, with numbers in the country the day was written for.
CPU is this process's; on PostgreSQL the reads' cost is the server's, so
the wall time per create (one request in flight) is the figure to read there.

Before the tenth session every kind had five-minute buckets and `bump_many`
took `bucket=`; docs/benchmarks.md says how the "before" figures were made.

Usage:
  .venv/bin/python bench/counter_windows.py [--db sqlite|pg] [--calls 1500]
  .venv/bin/python bench/counter_windows.py --smoke     # a few seconds, for CI
PostgreSQL: RELAY_BENCH_INPROCESS_PG, as bench/in_process.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from in_process import PG_URL, App, bench_settings, call, number

from relay.abuse import store
from relay.abuse.models import HOUR, Kind, step_of, window_start
from relay.accounts.models import Scope
from relay.clock import SystemClock
from relay.config import Settings
from relay.db.driver import Db
from relay.db.migrate import upgrade
from relay.services import build_services
from relay.web.app import create_app

DAY = timedelta(days=1)


async def measure(
    args: argparse.Namespace, settings: Settings, *, with_day: bool
) -> tuple[float, float]:
    services = build_services(settings)
    try:
        account = await services.accounts.create_account("Bench")
        if with_day:
            scope = Scope(account.id, livemode=False)
            await write_day(services.db, scope, args)
            await count_rows(services.db, scope)
        app = create_app(services)
        for _ in range(args.warmup):
            await create(app, account.test_key)
        started, wall = time.process_time(), time.perf_counter()
        for _ in range(args.calls):
            await create(app, account.test_key)
        cpu = (time.process_time() - started) / args.calls * 1e6
        return cpu, (time.perf_counter() - wall) / args.calls * 1e6
    finally:
        await services.close()


async def write_day(db: Db, scope: Scope, args: argparse.Namespace) -> None:
    """One send's counters every `per_step` seconds over the last 24 hours."""
    now = SystemClock().now()
    rows = [(Kind.ACCOUNT, "", 1, 0, 0), (Kind.COUNTRY, "US", 1, 0, 0)]
    moment = now - DAY
    while moment < now:
        await db.write(partial(store.bump_many, scope=scope, rows=rows, at=moment))
        moment += timedelta(seconds=args.per_step)


async def count_rows(db: Db, scope: Scope) -> None:
    """The counter rows each send adds up, per window, once the day is written."""
    now = SystemClock().now()
    windows = ((Kind.ACCOUNT, "", DAY, "day"), (Kind.COUNTRY, "US", HOUR, "hour"))
    for kind, subject, length, name in windows:
        since = window_start(now, length, step_of(kind))
        rows = await db.read(
            partial(store.window, scope=scope, kind=kind, subject=subject, since=since)
        )
        print(f"rows a send adds up for the {kind.value}'s {name}: {len(rows):,}")


async def create(app: App, key: str) -> None:
    status, body = await call(app, "POST", "/v1/verifications", number(), key)
    assert status == 200, body


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument(
        "--per-step", type=float, default=4.0, help="simulated seconds between two sends"
    )
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.warmup, args.per_step = 40, 5, 120.0
    if args.db == "pg":
        from verify_bench import _require_database, reset_schema

        asyncio.run(_require_database(PG_URL))
    figures: dict[str, tuple[float, float]] = {}
    for label, with_day in (("fresh database", False), ("a day of counters", True)):
        if args.db == "pg":
            asyncio.run(reset_schema(PG_URL))
        with tempfile.TemporaryDirectory() as tmp:
            settings = bench_settings(args, Path(tmp))
            upgrade(settings.resolved_database_url)
            figures[label] = asyncio.run(measure(args, settings, with_day=with_day))
    sends = int(DAY.total_seconds() / args.per_step)
    print(f"db={args.db} calls={args.calls} day={sends:,} sends, one every {args.per_step:g} s")
    print(f"{'database':<20} {'µs CPU per create':>18} {'µs wall per create':>19}")
    for label, (cpu, wall) in figures.items():
        print(f"{label:<20} {cpu:>18,.0f} {wall:>19,.0f}")


if __name__ == "__main__":
    main()
