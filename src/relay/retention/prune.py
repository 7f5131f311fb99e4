"""The retention prune: every account's due verifications and messages, in batches of one
short transaction each, so no lock is held for long (decision 0051)."""

from __future__ import annotations

from datetime import datetime, timedelta

from relay.db.driver import Db
from relay.db.sql import Tx
from relay.retention import store

BATCH = 500


async def prune(db: Db, *, now: datetime, delete_after: int, batch: int = BATCH) -> int:
    """Delete what is past its account's `delete_after` (else this one), keeping its
    figures; the number of verifications and messages deleted."""
    deleted = 0
    for account_id, own in await db.read(store.accounts):
        cutoff = now - timedelta(seconds=delete_after if own is None else own)
        for messages in (False, True):
            deleted += await _prune_kind(db, account_id, cutoff, messages=messages, batch=batch)
    return deleted


async def _prune_kind(
    db: Db, account_id: str, cutoff: datetime, *, messages: bool, batch: int
) -> int:
    async def one_batch(tx: Tx) -> int:
        return await store.prune_batch(
            tx, messages=messages, account_id=account_id, cutoff=cutoff, limit=batch
        )

    deleted = 0
    while True:
        done = await db.write(one_batch)
        deleted += done
        if done < batch:
            return deleted
