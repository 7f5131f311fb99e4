"""What a send is decided on reads back exactly as written, on either database, in one query."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from relay.abuse import store
from relay.abuse.models import BUCKET, Kind, Rules, Totals, step_of, window_start
from relay.abuse.service import AbuseGuard
from relay.accounts.models import Scope
from relay.db.driver import Db
from relay.db.sql import Sql
from tests.db.conftest import ACCOUNT_ID

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
_VERIFICATION = Sql(
    "INSERT INTO verifications (id, account_id, livemode, to_number, country, sender, locale,"
    " code_length, code_mac, sealed_code, status, checks, sends, metadata, webhook_url,"
    " created_at, updated_at, expires_at, last_sent_at) VALUES (:id, :account, :livemode, :to,"
    " 'US', 'Acme', 'en', 6, :mac, NULL, :status, 0, 1, :metadata, NULL, :created, :created,"
    " :expires, :created)"
)


async def seen(db: Db, *, recent: int = 10) -> store.SendContext:
    return await db.read(
        lambda tx: store.before_send(
            tx, SCOPE, NUMBER, WINDOWS, BLOCKS, opened_since=HOUR, recent=recent
        )
    )


async def verification(db: Db, id_: str, *, status: str, created: datetime) -> None:
    params = {
        "id": id_,
        "account": ACCOUNT_ID,
        "livemode": True,
        "to": NUMBER,
        "mac": b"m",
        "status": status,
        "metadata": {},
        "created": created,
        "expires": created + timedelta(minutes=10),
    }
    await db.write(lambda tx: tx.execute(_VERIFICATION, params))


@pytest.mark.asyncio
async def test_each_window_reads_its_own_counters_and_no_one_elses(db: Db) -> None:
    bucket = NOW - timedelta(minutes=30)
    await db.write(
        lambda tx: store.bump_many(
            tx,
            SCOPE,
            [(Kind.NUMBER, NUMBER, 3, 0, 1), (Kind.COUNTRY, "US", 5, 2, 0)],
            at=bucket,
        )
    )
    await db.write(
        lambda tx: store.bump_many(tx, SCOPE, [(Kind.NUMBER, "+14155550199", 7, 0, 0)], at=bucket)
    )

    found = await seen(db)

    assert found.counters[(Kind.COUNTRY, "US")] == Totals(sends=5, approvals=2)
    assert found.counters[(Kind.NUMBER, NUMBER)] == Totals(sends=3, failed_checks=1)
    assert found.counters[(Kind.ACCOUNT, "")] == Totals()
    assert found.blocked == {}
    assert found.verifications == []


@pytest.mark.asyncio
async def test_a_window_leaves_out_buckets_older_than_its_start(db: Db) -> None:
    old, recent = NOW - timedelta(hours=30), NOW - timedelta(hours=2)
    for bucket in (old, recent):
        await db.write(
            partial(store.bump_many, scope=SCOPE, rows=[(Kind.ACCOUNT, "", 1, 0, 0)], at=bucket)
        )

    found = await seen(db)

    assert found.counters[(Kind.ACCOUNT, "")] == Totals(sends=1)


@pytest.mark.asyncio
async def test_a_window_adds_up_every_shard_of_every_bucket(db: Db) -> None:
    rows = [(Kind.COUNTRY, "US", 1, 0, 0), (Kind.NUMBER, NUMBER, 1, 0, 0)]
    for minutes in (10, 10, 10, 40):
        bucket = NOW - timedelta(minutes=minutes)
        await db.write(partial(store.bump_many, scope=SCOPE, rows=rows, at=bucket))

    found = await seen(db)
    by_bucket = await db.read(lambda tx: store.window(tx, SCOPE, Kind.COUNTRY, "US", since=HOUR))
    numbers = await db.read(lambda tx: store.window(tx, SCOPE, Kind.NUMBER, NUMBER, since=DAY))

    assert found.counters[(Kind.COUNTRY, "US")] == Totals(sends=4)
    assert sum(b.sends for b in by_bucket) == 4
    # A number's row is its own, never split: one row per bucket.
    assert sorted(b.sends for b in numbers) == [1, 3]


@pytest.mark.asyncio
async def test_a_day_of_sends_leaves_the_account_window_a_row_an_hour_per_shard(db: Db) -> None:
    # A send every five minutes for a day: the daily cap's window must not have to
    # add up a row per five minutes (288, times the shards) on every send.
    start = NOW - timedelta(days=1) + BUCKET
    for step in range(288):
        rows = [(Kind.ACCOUNT, "", 1, 0, 0)]
        await db.write(partial(store.bump_many, scope=SCOPE, rows=rows, at=start + step * BUCKET))
    since = window_start(NOW, timedelta(days=1), step_of(Kind.ACCOUNT))

    buckets = await db.read(lambda tx: store.window(tx, SCOPE, Kind.ACCOUNT, "", since=since))

    shards = store.SHARDS if db.dialect == "postgresql" else 1
    assert len(buckets) <= 24 * shards
    assert sum(b.sends for b in buckets) == 288 - 11  # the first clock hour has left


@pytest.mark.asyncio
async def test_blocks_on_the_prefix_and_the_country_read_with_their_ends(db: Db) -> None:
    until = NOW + timedelta(minutes=20)
    await db.write(lambda tx: store.block(tx, SCOPE, Kind.COUNTRY, "US", until=until, now=NOW))

    found = await seen(db)

    assert found.blocked == {(Kind.COUNTRY, "US"): until}


@pytest.mark.asyncio
async def test_the_numbers_pending_and_recently_opened_verifications_come_along(db: Db) -> None:
    await verification(db, "ver_old_closed", status="approved", created=NOW - timedelta(hours=3))
    await verification(
        db, "ver_recent_closed", status="canceled", created=NOW - timedelta(minutes=20)
    )
    await verification(db, "ver_old_pending", status="pending", created=NOW - timedelta(hours=2))

    found = await seen(db)

    assert sorted((v.id, v.pending) for v in found.verifications) == [
        ("ver_old_pending", True),
        ("ver_recent_closed", False),
    ]
    pending = next(v for v in found.verifications if v.pending)
    assert pending.expires_at == NOW - timedelta(hours=2) + timedelta(minutes=10)


@pytest.mark.asyncio
async def test_of_the_numbers_closed_verifications_only_the_newest_few_are_read(db: Db) -> None:
    # A number that test suites reuse gathers thousands of closed verifications;
    # a send reads only as many as the hourly cap looks at (ids sort by creation).
    for minute in range(1, 6):
        created = NOW - timedelta(minutes=60 - minute * 5)
        await verification(db, f"ver_closed_{minute}", status="approved", created=created)
    await verification(db, "ver_open", status="pending", created=NOW - timedelta(hours=2))

    found = await seen(db, recent=3)

    assert sorted(v.id for v in found.verifications) == [
        "ver_closed_3",
        "ver_closed_4",
        "ver_closed_5",
        "ver_open",
    ]


@pytest.mark.asyncio
async def test_the_sweep_adds_the_shards_of_past_buckets_into_one_row_each(db: Db) -> None:
    rows = [(Kind.COUNTRY, "US", 1, 0, 0), (Kind.ACCOUNT, "", 1, 0, 0)]
    moments = [NOW - timedelta(minutes=m) for m in (95, 90, 50, 20, 1)]
    for moment in moments:
        for _ in range(12):  # enough sends that several shards are taken (PostgreSQL)
            await db.write(partial(store.bump_many, scope=SCOPE, rows=rows, at=moment))
    day = window_start(NOW, timedelta(days=1), step_of(Kind.ACCOUNT))

    def read(kind: Kind, subject: str, since: datetime) -> Any:
        return db.read(lambda tx: store.window(tx, SCOPE, kind, subject, since=since))

    before = await read(Kind.COUNTRY, "US", DAY), await read(Kind.ACCOUNT, "", day)
    await db.write(lambda tx: AbuseGuard(Rules()).prune(tx, now=NOW))
    country, account = await read(Kind.COUNTRY, "US", DAY), await read(Kind.ACCOUNT, "", day)

    assert sum(b.sends for b in country) == sum(b.sends for b in before[0]) == 60
    assert sum(b.sends for b in account) == sum(b.sends for b in before[1]) == 60
    # Past buckets are one row each; the last two (still written to) keep their shards.
    past = [b.start for b in country if b.start < NOW - timedelta(minutes=10)]
    assert len(past) == len(set(past)) == 4
    past_hours = [b.start for b in account if b.start < NOW - timedelta(hours=1)]
    assert len(past_hours) == len(set(past_hours)) == 1
