"""Callback nonces in the database: taken once per carrier, given back, pruned after their
window, by single statements that hold across processes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from relay.db.driver import Db
from relay.delivery import callback_nonces
from relay.delivery.callback_nonces import CallbackNonces

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


async def test_a_nonce_is_taken_once_per_carrier_and_again_once_given_back(db: Db) -> None:
    nonces = CallbackNonces(db)

    taken = [
        await nonces.first_use("plivo-a", "n-1", now=NOW, until=NOW + HOUR),
        await nonces.first_use("plivo-a", "n-1", now=NOW, until=NOW + HOUR),
        await nonces.first_use("plivo-b", "n-1", now=NOW, until=NOW + HOUR),
    ]
    await nonces.forget("plivo-a", "n-1")

    assert taken == [True, False, True]
    assert await nonces.first_use("plivo-a", "n-1", now=NOW, until=NOW + HOUR)


async def test_of_many_takers_of_one_nonce_at_once_exactly_one_gets_it(db: Db) -> None:
    nonces = CallbackNonces(db)

    taken = await asyncio.gather(
        *(nonces.first_use("plivo-a", "raced", now=NOW, until=NOW + HOUR) for _ in range(8))
    )

    assert sorted(taken) == [False] * 7 + [True]


async def test_nonces_past_their_window_are_pruned_and_others_kept(db: Db) -> None:
    nonces = CallbackNonces(db)
    await nonces.first_use("plivo-a", "old", now=NOW, until=NOW + HOUR)
    await nonces.first_use("plivo-a", "new", now=NOW + HOUR, until=NOW + 2 * HOUR)

    pruned = await db.write(
        lambda tx: callback_nonces.prune(tx, now=NOW + HOUR + timedelta(seconds=1))
    )

    assert pruned == 1
    assert not await nonces.first_use("plivo-a", "new", now=NOW, until=NOW + HOUR)
    assert await nonces.first_use("plivo-a", "old", now=NOW, until=NOW + HOUR)
