"""The abuse guard's counters read back exactly as written, on either database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from relay.abuse import store
from relay.abuse.models import Kind
from relay.accounts.models import Scope
from relay.db.driver import Db
from tests.db.conftest import ACCOUNT_ID

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
SCOPE = Scope(account_id=ACCOUNT_ID, livemode=True)


@pytest.mark.asyncio
async def test_each_window_reads_its_own_counters_once_even_when_padded(db: Db) -> None:
    hour = NOW - timedelta(hours=1)
    await db.write(
        lambda tx: store.bump_many(
            tx,
            SCOPE,
            [(Kind.NUMBER, "+14155550100", 3, 0, 1), (Kind.COUNTRY, "US", 5, 0, 0)],
            bucket=hour,
        )
    )
    await db.write(
        lambda tx: store.bump_many(tx, SCOPE, [(Kind.NUMBER, "+14155550199", 7, 0, 0)], bucket=hour)
    )

    # Two windows: the query pads them to four by repeating the last.
    found = await db.read(
        lambda tx: store.windows(
            tx,
            SCOPE,
            [
                (Kind.COUNTRY, "US", NOW - timedelta(days=1)),
                (Kind.NUMBER, "+14155550100", NOW - timedelta(days=1)),
            ],
        )
    )

    assert [b.sends for b in found[(Kind.COUNTRY, "US")]] == [5]
    assert [(b.sends, b.failed_checks) for b in found[(Kind.NUMBER, "+14155550100")]] == [(3, 1)]


@pytest.mark.asyncio
async def test_a_window_leaves_out_buckets_older_than_its_start(db: Db) -> None:
    old, recent = NOW - timedelta(hours=30), NOW - timedelta(hours=2)
    for bucket in (old, recent):
        await db.write(
            partial(store.bump_many, scope=SCOPE, rows=[(Kind.ACCOUNT, "", 1, 0, 0)], bucket=bucket)
        )

    found = await db.read(
        lambda tx: store.windows(tx, SCOPE, [(Kind.ACCOUNT, "", NOW - timedelta(days=1))])
    )

    assert [b.start for b in found[(Kind.ACCOUNT, "")]] == [recent]
