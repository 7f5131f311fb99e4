"""PostgreSQL's readers: a connection whose use was cut short is not handed out again."""

from __future__ import annotations

import asyncio

import pytest

from relay.db.driver import Db
from relay.db.sql import IntegrityViolation, Sql, Tx

SLEEP = Sql("SELECT pg_sleep(30)")
BACKEND = Sql("SELECT pg_backend_pid() AS pid")
SLEEPER = Sql(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    " AND query = 'SELECT pg_sleep(30)'"
)
CREATE = Sql("CREATE TABLE IF NOT EXISTS readers_probe (id TEXT PRIMARY KEY)")
INSERT = Sql("INSERT INTO readers_probe (id) VALUES (:id)")


def _postgres_only(db: Db) -> None:
    if db.dialect != "postgresql":
        pytest.skip("SQLite reads on its own connection, not on a set of readers")


async def _backend(tx: Tx) -> int:
    row = await tx.fetchrow(BACKEND)
    assert row is not None
    return int(row["pid"])


async def test_a_read_cancelled_mid_statement_is_not_handed_out_again(db: Db) -> None:
    _postgres_only(db)
    sleeping = asyncio.create_task(db.read(lambda tx: tx.fetch(SLEEP)))
    await asyncio.sleep(0.5)
    row = await db.read(lambda tx: tx.fetchrow(SLEEPER))  # a second reader, idle after this
    assert row is not None
    sleeper = int(row["pid"])
    sleeping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sleeping
    # Readers are handed out last in, first out: given back, it would answer next.
    answered = {await asyncio.wait_for(db.read(_backend), timeout=5) for _ in range(3)}
    assert sleeper not in answered


async def test_a_failed_statement_gives_its_reader_back(db: Db) -> None:
    _postgres_only(db)
    await db.write(lambda tx: tx.execute(CREATE))
    await db.write_alone(lambda tx: tx.execute(INSERT, {"id": "taken"}))
    before = await db.read(_backend)
    with pytest.raises(IntegrityViolation):
        await db.write_alone(lambda tx: tx.execute(INSERT, {"id": "taken"}))
    # Readers go back last in, first out: the same backend answers again.
    assert await db.read(_backend) == before
