"""The nonces of verified carrier callbacks, kept in the database so every process sees
them: a second callback with a nonce within its window is a replay (decision 0043)."""

from __future__ import annotations

from datetime import datetime

from relay.db.driver import Db
from relay.db.sql import Sql, Tx

# Taken in one statement: of two processes given the same callback, one inserts.
_TAKE = Sql(
    "INSERT INTO callback_nonces (carrier, nonce, expires_at) VALUES (:carrier, :nonce, :until)"
    " ON CONFLICT (carrier, nonce) DO NOTHING"
)
_FORGET = Sql("DELETE FROM callback_nonces WHERE carrier = :carrier AND nonce = :nonce")
_PRUNE = Sql("DELETE FROM callback_nonces WHERE expires_at < :now")


class CallbackNonces:
    """`relay.carriers.callbacks.NonceLedger` on the database."""

    def __init__(self, db: Db) -> None:
        self._db = db

    async def first_use(self, carrier: str, nonce: str, *, now: datetime, until: datetime) -> bool:
        params = {"carrier": carrier, "nonce": nonce, "until": until}
        return await self._db.write_alone(lambda tx: tx.execute(_TAKE, params)) == 1

    async def forget(self, carrier: str, nonce: str) -> None:
        params = {"carrier": carrier, "nonce": nonce}
        await self._db.write_alone(lambda tx: tx.execute(_FORGET, params))


async def prune(tx: Tx, *, now: datetime) -> int:
    """Nonces past their window (the carrier's `signature_tolerance`). A callback that
    signs a time is refused as stale from then on; for one that signs none, the window
    is how long a captured signature stays refused (decision 0043)."""
    return await tx.execute(_PRUNE, {"now": now})
