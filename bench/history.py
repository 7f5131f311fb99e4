"""CPU per create on a fresh database, and on databases with a history behind them.

Every other benchmark starts on an empty database, so it never sees a read
whose cost grows with what came before. Two such histories:

* **a day of counters**: every send reads its account's abuse counters over
  the last 24 hours (the daily SMS cap) and its country's over the last hour
  (the pumping guard). The day is written by Relay's own code
  (`relay.abuse.store.bump_many`), one send's counters every `--per-step`
  seconds of simulated time, so the rows it leaves are whatever the code
  under test writes: its bucket sizes, its shards.
* **a reused number**: `--closed` closed verifications of one number (as an
  integration suite leaves on the sandbox's +15005550006), then creates to
  that number, each canceled before the next (a create to a number with a
  pending verification is a resend).

Creates run through the ASGI app in this process (as bench/in_process.py),
one at a time, with the default per-number cap (10 an hour, 100 for test
keys). CPU is this process's; on PostgreSQL the reads' cost is the server's,
so the wall time per create is the figure to read there.

Usage:
  .venv/bin/python bench/history.py [--db sqlite|pg] [--calls 90] [--closed 100000]
  .venv/bin/python bench/history.py --smoke     # a few seconds, for CI
PostgreSQL: RELAY_BENCH_INPROCESS_PG, as bench/in_process.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from in_process import PG_URL, bench_settings, call, number

from relay.abuse import store
from relay.abuse.models import HOUR, Kind, step_of, window_start
from relay.accounts.models import Scope
from relay.clock import SystemClock
from relay.config import Settings
from relay.db.migrate import upgrade
from relay.db.sql import Sql, Tx
from relay.ids import new_id
from relay.services import Services, build_services
from relay.web.app import create_app

DAY = timedelta(days=1)
REUSED = "+15005550006"
BATCH = 5_000
_CLOSED = Sql(
    "INSERT INTO verifications (id, account_id, livemode, to_number, country, sender, locale,"
    " code_length, code_mac, sealed_code, status, checks, sends, metadata, webhook_url,"
    " created_at, updated_at, expires_at, last_sent_at) VALUES (:id, :account, FALSE, :to,"
    " 'US', 'Bench', 'en', 6, :mac, NULL, 'approved', 1, 1, :metadata, NULL, :at, :at, :at,"
    " :at)"
)
Setup = Callable[[Services, Scope, argparse.Namespace], Awaitable[Callable[[], bytes]]]


async def fresh(services: Services, scope: Scope, args: argparse.Namespace) -> Callable[[], bytes]:
    return number


async def day_of_counters(
    services: Services, scope: Scope, args: argparse.Namespace
) -> Callable[[], bytes]:
    """One send's counters every `per_step` seconds over the last 24 hours."""
    now = SystemClock().now()
    rows = [(Kind.ACCOUNT, "", 1, 0, 0), (Kind.COUNTRY, "US", 1, 0, 0)]
    moment = now - DAY
    while moment < now:
        await services.db.write(partial(store.bump_many, scope=scope, rows=rows, at=moment))
        moment += timedelta(seconds=args.per_step)
    for kind, subject, length, name in (
        (Kind.ACCOUNT, "", DAY, "day"),
        (Kind.COUNTRY, "US", HOUR, "hour"),
    ):
        since = window_start(now, length, step_of(kind))
        read = partial(store.window, scope=scope, kind=kind, subject=subject, since=since)
        rows = await services.db.read(read)
        print(f"  rows a send adds up for the {kind.value}'s {name}: {len(rows):,}")
    return number


async def reused_number(
    services: Services, scope: Scope, args: argparse.Namespace
) -> Callable[[], bytes]:
    """`closed` approved verifications of one number, two days old and older."""
    now = SystemClock().now()
    for start in range(0, args.closed, BATCH):
        rows = [
            {
                "id": new_id("ver"),
                "account": scope.account_id,
                "to": REUSED,
                "mac": b"bench",
                "metadata": {},
                "at": now - timedelta(days=2, seconds=start + i),
            }
            for i in range(min(BATCH, args.closed - start))
        ]
        await services.db.write(partial(_insert_many, rows=rows))
    return lambda: json.dumps({"to": REUSED}).encode()


async def _insert_many(tx: Tx, rows: list[dict[str, object]]) -> None:
    await tx.executemany(_CLOSED, rows)


async def measure(
    args: argparse.Namespace, settings: Settings, setup: Setup
) -> tuple[float, float]:
    services = build_services(settings)
    try:
        account = await services.accounts.create_account("Bench")
        body = await setup(services, Scope(account.id, livemode=False), args)
        app = create_app(services)
        for _ in range(args.warmup):
            status, answer = await call(
                app, "POST", "/v1/verifications", number(), account.test_key
            )
            assert status == 200, answer
        cpu = wall = 0.0
        for _ in range(args.calls):
            started, clock = time.process_time(), time.perf_counter()
            status, answer = await call(app, "POST", "/v1/verifications", body(), account.test_key)
            cpu += time.process_time() - started
            wall += time.perf_counter() - clock
            assert status == 200, answer
            cancel = f"/v1/verifications/{json.loads(answer)['id']}/cancel"
            status, answer = await call(app, "POST", cancel, b"", account.test_key)
            assert status == 200, answer
        return cpu / args.calls * 1e6, wall / args.calls * 1e6
    finally:
        await services.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    # At most 100 an hour to one number with a test key: the reused number's creates.
    parser.add_argument("--calls", type=int, default=90)
    parser.add_argument(
        "--per-step", type=float, default=4.0, help="simulated seconds between two sends"
    )
    parser.add_argument("--closed", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=50, help="creates to other numbers first")
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.per_step, args.closed, args.warmup = 10, 120.0, 2_000, 5
    if args.db == "pg":
        from verify_bench import _require_database, reset_schema

        asyncio.run(_require_database(PG_URL))
    cases: list[tuple[str, Setup]] = [
        ("fresh database", fresh),
        ("a day of counters", day_of_counters),
        (f"a reused number ({args.closed:,} closed)", reused_number),
    ]
    figures: dict[str, tuple[float, float]] = {}
    for label, setup in cases:
        if args.db == "pg":
            asyncio.run(reset_schema(PG_URL))
        print(label)
        with tempfile.TemporaryDirectory() as tmp:
            # The default per-number cap (the benchmarks' settings lift it).
            settings = bench_settings(args, Path(tmp)).model_copy(
                update={"number_verifications_per_hour": 10}
            )
            upgrade(settings.resolved_database_url)  # runs its own event loop on PostgreSQL
            figures[label] = asyncio.run(measure(args, settings, setup))
    print(f"\ndb={args.db} calls={args.calls}, a day = one send every {args.per_step:g} s")
    print(f"{'database':<34} {'µs CPU per create':>18} {'µs wall per create':>19}")
    for label, (cpu, wall) in figures.items():
        print(f"{label:<34} {cpu:>18,.0f} {wall:>19,.0f}")


if __name__ == "__main__":
    main()
