"""Cost of one two-row write transaction: raw sqlite3 vs Relay's Database adapter.

Usage: .venv/bin/python bench/storage.py [N]   (prints microseconds per transaction)
Set RELAY_BENCH_PG=postgresql://127.0.0.1:5432/test to add PostgreSQL (16 concurrent).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import Column, Connection, LargeBinary, MetaData, String, Table, insert

from relay.db.engine import open_database

meta = MetaData()
rows = Table(
    "bench_rows", meta, Column("id", String(40), primary_key=True), Column("v", LargeBinary)
)
outbox = Table(
    "bench_outbox", meta, Column("id", String(40), primary_key=True), Column("ref", String(40))
)


def raw_sqlite(path: Path, n: int) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL"):
        db.execute(f"PRAGMA {pragma}")
    db.execute("CREATE TABLE IF NOT EXISTS r (id TEXT PRIMARY KEY, v BLOB)")
    db.execute("CREATE TABLE IF NOT EXISTS o (id TEXT PRIMARY KEY, ref TEXT)")
    started = time.perf_counter()
    for _ in range(n):
        key = uuid.uuid4().hex
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO r VALUES (?, ?)", (key, b"x" * 32))
        db.execute("INSERT INTO o VALUES (?, ?)", ("o" + key, key))
        db.execute("COMMIT")
    return (time.perf_counter() - started) / n * 1e6


def _work(conn: Connection) -> None:
    key = uuid.uuid4().hex
    conn.execute(insert(rows).values(id=key, v=b"x" * 32))
    conn.execute(insert(outbox).values(id="o" + key, ref=key))


async def adapter(url: str, n: int, concurrency: int) -> float:
    db = open_database(url)
    await db.write(lambda conn: meta.create_all(conn))

    async def worker(count: int) -> None:
        for _ in range(count):
            await db.write(_work)

    started = time.perf_counter()
    await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await db.write(lambda conn: meta.drop_all(conn))
    await db.close()
    return elapsed / n * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    with tempfile.TemporaryDirectory() as tmp:
        print(f"raw sqlite3, one connection       {raw_sqlite(Path(tmp) / 'raw.db', n):8.1f} µs/tx")
        url = f"sqlite:///{Path(tmp) / 'relay.db'}"
        for concurrency in (1, 16):
            cost = asyncio.run(adapter(url, n, concurrency))
            print(f"Relay SQLite adapter, {concurrency:2} concurrent {cost:8.1f} µs/tx")
    pg = os.environ.get("RELAY_BENCH_PG")
    if pg:
        cost = asyncio.run(adapter(pg, n, 16))
        print(f"Relay PostgreSQL adapter, 16 conc. {cost:8.1f} µs/tx ({1e6 / cost:,.0f} tx/s)")


if __name__ == "__main__":
    main()
