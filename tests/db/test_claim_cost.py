"""A webhook claim does as much work beside an endpoint at its cap with thousands of
due events as beside one with a hundred: it never walks a full endpoint's backlog.

Work is counted, never timed. Each statement the claim ran (traced) is run again
on a connection of its own inside a transaction that is rolled back: on SQLite,
counting the virtual machine instructions it executes (a progress handler called
at every one); on PostgreSQL, summing the rows its plan's scans read under
EXPLAIN ANALYZE, with custom and with generic plans, on tables that have no
statistics (autovacuum off), as a new database has.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest_asyncio

from relay.clock import SystemClock
from relay.db.driver import Db, open_db
from relay.db.sql import Params, Sql, Tx, values
from relay.db.urls import is_postgres, postgres_dsn
from relay.events import store
from relay.events.claims import Capacity, Ledger
from relay.events.models import EventType, NewEvent
from relay.ids import new_id
from tests.db.test_generic_plans import analyzed
from tests.webhooks.receiver import isolated_database

FULL = "https://full.example"
HEALTHY = "https://healthy.example"
PER_ENDPOINT = 4
SMALL, LARGE = 100, 3000
# The rows a PostgreSQL claim may read here: the healthy endpoint's few, a seek
# or two per endpoint, never the full endpoint's due rows.
ROWS_AT_MOST = 40
_ACCOUNT = Sql("INSERT INTO accounts (id, name, brand, created_at) VALUES ('acct_c', 'C', 'C', :t)")

Traced = list[tuple[Sql, Params | None]]


@pytest_asyncio.fixture
async def db(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[str, Db]]:
    url = await asyncio.to_thread(isolated_database, database_url, "claim_cost", tmp_path)
    if is_postgres(url):
        connection = await asyncpg.connect(postgres_dsn(url))
        try:
            for table in ("events", "webhook_attempts"):
                await connection.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        finally:
            await connection.close()
    opened = open_db(url)
    await opened.write(lambda tx: tx.execute(_ACCOUNT, {"t": datetime.now(UTC)}))
    try:
        yield url, opened
    finally:
        await opened.close()


async def add_due(db: Db, url: str, count: int) -> None:
    due = datetime.now(UTC) - timedelta(seconds=5)

    async def work(tx: Tx) -> None:
        for n in range(count):
            event = NewEvent(new_id("evt"), EventType.VERIFICATION_SENT, due, False, {"n": n})
            await store.record(
                tx, event, account_id="acct_c", related_id=new_id("ver"), webhook_url=url
            )

    await db.write(work)


@contextmanager
def traced(db: Db) -> Iterator[Traced]:
    seen: Traced = []
    db.trace(lambda statement, params: seen.append((statement, params)))
    try:
        yield seen
    finally:
        db.trace(None)


async def claim_beside_a_full_endpoint(db: Db) -> tuple[list[str], Traced]:
    """Three due events of a healthy endpoint, claimed while FULL is at its cap."""
    await add_due(db, f"{HEALTHY}/hook", 3)
    ledger = Ledger(db, SystemClock(), lease=60.0, schedule=[1.0], random=lambda: 0.5)
    capacity = Capacity(total=16, per_endpoint=PER_ENDPOINT, busy_endpoints={FULL: PER_ENDPOINT})
    with traced(db) as statements:
        batch = await ledger.claim(owner="w", capacity=capacity)
    return [claim.webhook_url for claim in batch.claims], statements


def sqlite_steps(url: str, statements: Traced) -> int:
    """Virtual machine instructions the statements execute, rolled back."""
    connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    try:
        connection.execute("BEGIN")
        connection.set_progress_handler(count, 1)
        for statement, params in statements:
            connection.execute(statement.sqlite, values(statement, params, "sqlite")).fetchall()
        connection.set_progress_handler(None, 1)
        connection.execute("ROLLBACK")
    finally:
        connection.close()
    return steps


def rows_read(plan: dict[str, Any]) -> int:
    """Rows the plan's scans read, kept or thrown away, over the whole tree."""
    own = 0
    if "Scan" in str(plan.get("Node Type", "")):
        per_loop = (
            float(plan.get("Actual Rows", 0))
            + float(plan.get("Rows Removed by Filter", 0))
            + float(plan.get("Rows Removed by Index Recheck", 0))
        )
        own = round(per_loop * float(plan.get("Actual Loops", 1)))
    return own + sum(rows_read(child) for child in plan.get("Plans", []))


async def postgres_rows(url: str, statements: Traced, mode: str) -> int:
    connection = await asyncpg.connect(postgres_dsn(url))
    total = 0
    try:
        await connection.execute(f"SET plan_cache_mode = {mode}")
        for number, (statement, params) in enumerate(statements):
            total += rows_read(await analyzed(connection, f"claim_{number}", statement, params))
    finally:
        await connection.close()
    return total


async def work_of(url: str, statements: Traced) -> dict[str, int]:
    if not is_postgres(url):
        return {"sqlite vm steps": await asyncio.to_thread(sqlite_steps, url, statements)}
    return {
        mode: await postgres_rows(url, statements, mode)
        for mode in ("force_custom_plan", "force_generic_plan")
    }


async def test_a_claim_reads_no_more_beside_a_full_endpoints_large_backlog_than_a_small_one(
    db: tuple[str, Db],
) -> None:
    url, opened = db
    await add_due(opened, f"{FULL}/hook", SMALL)
    claimed, statements = await claim_beside_a_full_endpoint(opened)
    assert claimed == [f"{HEALTHY}/hook"] * 3
    small = await work_of(url, statements)

    await add_due(opened, f"{FULL}/hook", LARGE - SMALL)
    claimed, statements = await claim_beside_a_full_endpoint(opened)
    assert claimed == [f"{HEALTHY}/hook"] * 3
    large = await work_of(url, statements)

    # The healthy endpoint's earlier three are leased now, and a claim may pass
    # over leased rows of an endpoint it reads: a little more, never per backlog row.
    for measure, work in large.items():
        assert work <= small[measure] + 60, (measure, small, large)
        if is_postgres(url):
            assert work <= ROWS_AT_MOST, (measure, small, large)
