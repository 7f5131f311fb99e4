"""What group commit buys a create, on Relay's own schema, in this process.

Runs a six-statement create (API key lookup, idempotency record,
verification, delivered attempt, its two events, the account's daily counter
upsert) through `relay.db` with `--concurrency` creates in flight, twice:
once with a transaction per create (batches of one) and once with group
commit (batches of up to 64). Prints creates per second and CPU per create
for each, and the creates per commit. No HTTP: this isolates the data layer.

Usage:
  .venv/bin/python bench/group_commit.py [--calls 4000] [--concurrency 64] [--db sqlite|pg]
  .venv/bin/python bench/group_commit.py --smoke
PostgreSQL: RELAY_BENCH_GROUP_PG, default postgresql://127.0.0.1:5432/relay_bench_group;
create it once: psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE relay_bench_group'
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from relay.db.driver import Db, open_db  # noqa: E402
from relay.db.group_commit import Unit  # noqa: E402
from relay.db.migrate import upgrade  # noqa: E402
from relay.db.sql import Sql, Tx  # noqa: E402
from relay.ids import new_id  # noqa: E402

PG_URL = os.environ.get("RELAY_BENCH_GROUP_PG", "postgresql://127.0.0.1:5432/relay_bench_group")
ACCOUNT = "acct_bench"
KEY_HASH = hashlib.sha256(b"sk_test_bench").hexdigest()

KEY = Sql(
    "SELECT k.account_id, k.livemode, a.brand FROM api_keys k JOIN accounts a"
    " ON a.id = k.account_id WHERE k.key_hash = :hash AND k.revoked_at IS NULL"
)
IDEMPOTENCY = Sql(
    "INSERT INTO idempotency_keys (account_id, livemode, key, request_hash, status,"
    " locked_until, created_at) VALUES (:account, :livemode, :key, :hash, 'done', :now, :now)"
    " ON CONFLICT DO NOTHING RETURNING id"
)
VERIFICATION = Sql(
    "INSERT INTO verifications (id, account_id, livemode, to_number, country, sender, locale,"
    " code_length, code_mac, sealed_code, status, checks, sends, metadata, webhook_url,"
    " created_at, updated_at, expires_at, last_sent_at) VALUES (:id, :account, :livemode, :to,"
    " 'US', 'Acme', 'en', 6, :mac, :sealed, 'pending', 0, 1, :metadata, NULL, :now, :now,"
    " :expires, :now)"
)
ATTEMPT = Sql(
    "INSERT INTO attempts (id, verification_id, carrier, status, carrier_message_id, at,"
    " updated_at, route, position) VALUES (:id, :verification, 'sandbox', 'delivered', :id,"
    " :now, :now, :route, 0)"
)
EVENTS = Sql(
    "INSERT INTO events (id, account_id, livemode, type, related_id, payload, delivery_status,"
    " created_at) VALUES (:sent, :account, :livemode, 'verification.sent', :verification,"
    " :payload, 'none', :now), (:delivered, :account, :livemode, 'verification.delivered',"
    " :verification, :payload, 'none', :now)"
)
COUNTER = Sql(
    "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, sends, approvals,"
    " failed_checks) VALUES (:account, :livemode, 'account', '', :day, 1, 0, 0)"
    " ON CONFLICT (account_id, livemode, kind, subject, bucket, shard)"
    " DO UPDATE SET sends = abuse_counters.sends + 1 RETURNING sends"
)


async def seed(db: Db) -> None:
    now = datetime.now(UTC)

    async def unit(tx: Tx) -> None:
        await tx.execute(
            Sql(
                "INSERT INTO accounts (id, name, brand, created_at) VALUES (:id, 'Acme',"
                " 'Acme', :now) ON CONFLICT DO NOTHING"
            ),
            {"id": ACCOUNT, "now": now},
        )
        await tx.execute(
            Sql(
                "INSERT INTO api_keys (id, account_id, livemode, key_hash, last4, created_at)"
                " VALUES ('key_bench', :account, FALSE, :hash, 'ench', :now)"
                " ON CONFLICT DO NOTHING"
            ),
            {"account": ACCOUNT, "hash": KEY_HASH, "now": now},
        )

    await db.write(unit)


def create_unit(n: int) -> Unit[str]:
    now = datetime.now(UTC)
    verification = new_id("ver")
    params: dict[str, Any] = {
        "id": verification,
        "account": ACCOUNT,
        "livemode": False,
        "to": f"+1415{n:07d}",
        "mac": os.urandom(32),
        "sealed": os.urandom(40),
        "metadata": {},
        "now": now,
        "expires": now + timedelta(minutes=10),
    }

    async def unit(tx: Tx) -> str:
        await tx.fetchrow(
            IDEMPOTENCY,
            {"account": ACCOUNT, "livemode": False, "key": verification, "hash": "h", "now": now},
        )
        await tx.execute(VERIFICATION, params)
        await tx.execute(
            ATTEMPT,
            {"id": new_id("att"), "verification": verification, "now": now, "route": ["sandbox"]},
        )
        await tx.execute(
            EVENTS,
            {
                "sent": new_id("evt"),
                "delivered": new_id("evt"),
                "account": ACCOUNT,
                "livemode": False,
                "verification": verification,
                "payload": "{}",
                "now": now,
            },
        )
        await tx.fetchrow(COUNTER, {"account": ACCOUNT, "livemode": False, "day": now})
        return verification

    return unit


async def run(url: str, *, calls: int, concurrency: int, batch: int) -> dict[str, float]:
    db = open_db(url, max_batch=batch)
    try:
        await seed(db)
        gate = asyncio.Semaphore(concurrency)
        counter = iter(range(10**9))

        async def one() -> None:
            async with gate:
                await db.read(lambda tx: tx.fetchrow(KEY, {"hash": KEY_HASH}))
                await db.write(create_unit(next(counter) + batch * 10**6))

        commits = db.commits  # type: ignore[attr-defined]
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one() for _ in range(calls)))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        commits = db.commits - commits  # type: ignore[attr-defined]
    finally:
        await db.close()
    return {"per_s": calls / wall, "cpu_us": cpu / calls * 1e6, "per_commit": calls / commits}


def fresh_url(kind: str, directory: Path) -> str:
    if kind == "sqlite":
        url = f"sqlite:///{directory / 'bench.sqlite3'}"
    else:
        import asyncpg

        async def reset() -> None:
            conn = await asyncpg.connect(PG_URL)
            try:
                await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
            finally:
                await conn.close()

        asyncio.run(reset())
        url = PG_URL
    upgrade(url)
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    calls = 200 if args.smoke else args.calls
    with tempfile.TemporaryDirectory() as tmp:
        url = fresh_url(args.db, Path(tmp))
        print(f"{args.db}, {calls} creates, {args.concurrency} in flight")
        print(f"{'mode':<22}{'creates/s':>10}{'CPU µs/create':>15}{'creates/commit':>16}")
        for name, batch in (("transaction each", 1), ("group commit", 64)):
            figures = asyncio.run(run(url, calls=calls, concurrency=args.concurrency, batch=batch))
            print(
                f"{name:<22}{figures['per_s']:>10.0f}{figures['cpu_us']:>15.0f}"
                f"{figures['per_commit']:>16.1f}"
            )


if __name__ == "__main__":
    main()
