"""Counters a batch adds to are written once per row at its end, and every unit of the
batch still reads the counts of the units before it, exactly (`relay.db.sums`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import pytest_asyncio

from relay.abuse import store
from relay.abuse.models import Kind, Totals
from relay.accounts.models import Scope
from relay.db.driver import Db, open_db
from relay.db.sql import Params, Sql, Tx
from tests.db.conftest import ACCOUNT_ID
from tests.webhooks.receiver import isolated_database

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
SCOPE = Scope(account_id=ACCOUNT_ID, livemode=True)
NUMBER = "+14155550100"
DAY, HOUR = NOW - timedelta(days=1), NOW - timedelta(hours=1)
WINDOWS = [
    (Kind.NUMBER, NUMBER, DAY),
    (Kind.PREFIX, NUMBER[:-4], HOUR),
    (Kind.COUNTRY, "US", HOUR),
    (Kind.ACCOUNT, "", DAY),
]
BLOCKS = [(Kind.PREFIX, NUMBER[:-4]), (Kind.COUNTRY, "US")]
SEND = [
    (Kind.PREFIX, NUMBER[:-4], 1, 0, 0),
    (Kind.COUNTRY, "US", 1, 0, 0),
    (Kind.ACCOUNT, "", 1, 0, 0),
]
_ACCOUNT = Sql(
    "INSERT INTO accounts (id, name, brand, created_at) VALUES (:id, 'Acme', 'Acme', :created)"
)


@pytest_asyncio.fixture
async def db(tmp_path: Path, database_url: str) -> AsyncIterator[Db]:
    """Batches of many units on either database (PostgreSQL commits one unit at a time
    unless told otherwise)."""
    url = await asyncio.to_thread(isolated_database, database_url, "held_counters", tmp_path)
    opened = open_db(url, max_batch=16)
    await opened.write(lambda tx: tx.execute(_ACCOUNT, {"id": ACCOUNT_ID, "created": NOW}))
    try:
        yield opened
    finally:
        await opened.close()


async def counters(tx: Tx) -> dict[tuple[Kind, str], Totals]:
    found = await store.before_send(
        tx, SCOPE, NUMBER, WINDOWS, BLOCKS, opened_since=HOUR, recent=10
    )
    return found.counters


async def send(tx: Tx) -> int:
    """A send as a create makes it: the counters read, then its own added."""
    sends = (await counters(tx))[(Kind.ACCOUNT, "")].sends
    await store.bump_many(tx, SCOPE, SEND, at=NOW)
    return sends


class Refused(Exception):
    pass


async def refused_send(tx: Tx) -> int:
    await send(tx)
    raise Refused()


@pytest.mark.asyncio
async def test_each_unit_of_a_batch_reads_the_sends_of_the_units_before_it(db: Db) -> None:
    commits = db.commits
    seen = await asyncio.gather(*(db.write(send) for _ in range(6)))
    assert db.commits == commits + 1
    assert seen == [0, 1, 2, 3, 4, 5]
    written = await db.read(counters)
    assert written[(Kind.ACCOUNT, "")] == Totals(sends=6)
    assert written[(Kind.COUNTRY, "US")] == Totals(sends=6)
    assert written[(Kind.PREFIX, NUMBER[:-4])] == Totals(sends=6)


@pytest.mark.asyncio
async def test_a_unit_rolled_back_takes_its_counts_with_it(db: Db) -> None:
    outcomes = await asyncio.gather(
        db.write(send), db.write(refused_send), db.write(send), return_exceptions=True
    )
    assert outcomes[0] == 0
    assert isinstance(outcomes[1], Refused)
    assert outcomes[2] == 1
    assert (await db.read(counters))[(Kind.ACCOUNT, "")] == Totals(sends=2)


@pytest.mark.asyncio
async def test_a_unit_alone_rolled_back_writes_no_counts(db: Db) -> None:
    with pytest.raises(Refused):
        await db.write(refused_send)
    assert (await db.read(counters))[(Kind.ACCOUNT, "")] == Totals()


@pytest.mark.asyncio
async def test_a_batch_writes_each_row_it_added_to_once_after_its_units(db: Db) -> None:
    written: list[tuple[str, int]] = []

    def trace(statement: Sql, params: Params | None) -> None:
        written.append((statement.text.split()[0], 0 if params is None else 1))

    db.trace(trace)
    try:
        await asyncio.gather(*(db.write(send) for _ in range(4)))
    finally:
        db.trace(None)
    # Four reads, then one upsert (an executemany: traced once) of the three rows.
    assert [verb for verb, _ in written] == ["SELECT"] * 4 + ["INSERT"]


@pytest.mark.asyncio
async def test_a_refusal_reads_the_buckets_the_batch_holds(db: Db) -> None:
    prefix = NUMBER[:-4]

    async def approval_then_window(tx: Tx) -> int:
        await store.bump_many(tx, SCOPE, [(Kind.PREFIX, prefix, 0, 1, 0)], at=NOW)
        buckets = await store.window(tx, SCOPE, Kind.PREFIX, prefix, since=DAY)
        return sum(bucket.approvals for bucket in buckets)

    seen = await asyncio.gather(*(db.write(approval_then_window) for _ in range(3)))
    assert seen == [1, 2, 3]


@pytest.mark.asyncio
async def test_a_wrong_code_is_counted_in_its_unit_and_seen_by_the_next(db: Db) -> None:
    async def wrong_code_then_window(tx: Tx) -> int:
        await store.add_failed_check(tx, SCOPE, NUMBER, at=NOW)
        buckets = await store.window(tx, SCOPE, Kind.NUMBER, NUMBER, since=DAY)
        return sum(bucket.failed_checks for bucket in buckets)

    seen = await asyncio.gather(*(db.write(wrong_code_then_window) for _ in range(3)))
    assert seen == [1, 2, 3]
