"""What one webhook claim costs while an endpoint at its cap has a backlog of due events.

Writes `--backlog` due events for one endpoint (and a few for a second one,
all delivered, so that only the first has due work) into a fresh database,
then runs the delivery loop's claim (`Ledger.claim`) `--claims` times with
that endpoint full, as the loop does while its slots are taken. Nothing is
claimed, so every run sees the same rows. Prints the median and p90 of a
claim, for each backlog size. This is the measurement of the soak section in
docs/benchmarks.md.

  .venv/bin/python bench/claim_backlog.py                       # SQLite, 0/10k/20k/40k
  .venv/bin/python bench/claim_backlog.py --db pg               # RELAY_BENCH_CLAIM_PG
  .venv/bin/python bench/claim_backlog.py --smoke               # a few seconds, figures meaningless
PostgreSQL: RELAY_BENCH_CLAIM_PG, default postgresql://127.0.0.1:5432/relay_bench_claim;
create it once: createdb -h 127.0.0.1 -U postgres relay_bench_claim
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from relay.clock import SystemClock  # noqa: E402
from relay.db.driver import Db, open_db  # noqa: E402
from relay.db.migrate import upgrade  # noqa: E402
from relay.db.sql import Sql, Tx  # noqa: E402
from relay.events import store  # noqa: E402
from relay.events.claims import Capacity, Ledger  # noqa: E402
from relay.events.models import EventType, NewEvent  # noqa: E402
from relay.ids import new_id  # noqa: E402

PG_URL = os.environ.get("RELAY_BENCH_CLAIM_PG", "postgresql://127.0.0.1:5432/relay_bench_claim")
ACCOUNT = "acct_bench"
FULL = "https://sink.example:8443"
PER_ENDPOINT = 16
_ACCOUNT = Sql(
    "INSERT INTO accounts (id, name, brand, created_at) VALUES (:id, 'Bench', 'Bench', :now)"
)
_DELIVERED = Sql("UPDATE events SET delivery_status = 'delivered' WHERE webhook_url = :url")


async def add_events(db: Db, url: str, count: int, *, at: datetime) -> None:
    """`count` events due at `at`, written 2,000 to a transaction."""
    for start in range(0, count, 2000):
        size = min(2000, count - start)

        async def unit(tx: Tx, size: int = size) -> None:
            await _write(tx, url, size, at=at)

        await db.write(unit)


async def _write(tx: Tx, url: str, count: int, *, at: datetime) -> None:
    for _ in range(count):
        event = NewEvent(new_id("evt"), EventType.VERIFICATION_SENT, at, False, {"n": 1})
        await store.record(tx, event, account_id=ACCOUNT, related_id=new_id("ver"), webhook_url=url)


async def timed_claims(db: Db, claims: int) -> list[float]:
    ledger = Ledger(db, SystemClock(), lease=30.0, schedule=[1.0], random=lambda: 0.5)
    capacity = Capacity(total=64, per_endpoint=PER_ENDPOINT, busy_endpoints={FULL: PER_ENDPOINT})
    spent = []
    for _ in range(claims):
        started = time.perf_counter()
        batch = await ledger.claim(owner="bench", capacity=capacity)
        spent.append((time.perf_counter() - started) * 1000)
        assert not batch.claims, "the full endpoint's events were claimed"
    return spent


async def run(url: str, sizes: list[int], claims: int) -> None:
    db = open_db(url)
    try:
        now = datetime.now(UTC) - timedelta(seconds=1)
        await db.write(lambda tx: tx.execute(_ACCOUNT, {"id": ACCOUNT, "now": now}))
        # Rows of another endpoint, already delivered: the table is not only the backlog.
        await add_events(db, "https://other.example/hook", 200, at=now)
        await db.write(lambda tx: tx.execute(_DELIVERED, {"url": "https://other.example/hook"}))
        have = 0
        print(f"{'due events':>10}  {'claim ms p50':>12}  {'p90':>8}")
        for size in sizes:
            await add_events(db, f"{FULL}/ok", size - have, at=now)
            have = size
            spent = sorted(await timed_claims(db, claims))
            p90 = spent[int(len(spent) * 0.9) - 1]
            print(f"{size:>10}  {statistics.median(spent):>12.2f}  {p90:>8.2f}")
    finally:
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--sizes", default="0,10000,20000,40000")
    parser.add_argument("--claims", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    args = parser.parse_args()
    sizes = [1, 500] if args.smoke else [int(s) for s in args.sizes.split(",")]
    claims = 5 if args.smoke else args.claims
    with tempfile.TemporaryDirectory() as tmp:
        url = PG_URL if args.db == "pg" else f"sqlite:///{Path(tmp) / 'claim.sqlite3'}"
        if args.db == "pg":
            _reset_pg(url)
        upgrade(url)  # runs an event loop of its own on PostgreSQL
        asyncio.run(run(url, sizes, claims))


def _reset_pg(url: str) -> None:
    import asyncpg

    async def drop() -> None:
        connection = await asyncpg.connect(url)
        try:
            await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        finally:
            await connection.close()

    asyncio.run(drop())


if __name__ == "__main__":
    main()
