"""Receipts for erased attempts, dropped: an erasure (relay.erasure) keeps the carrier and
the SHA-256 of each deleted attempt's message id for a while, so a receipt that comes
later matches no attempt and is not parked as an early one (`early_reports`) either.

Only a hash is kept: the table never holds a carrier's message id, and nothing in it
leads back to a destination.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime, timedelta

from relay.db.sql import Sql, Tx

# Longer than carriers go on reporting on an SMS (validity periods of up to 72 hours).
WINDOW = timedelta(days=3)

_KEEP = Sql(
    "INSERT INTO erased_receipts (carrier, message_hash, expires_at)"
    " VALUES (:carrier, :hash, :until) ON CONFLICT (carrier, message_hash) DO NOTHING"
)
_FORGET_EARLY = Sql(
    "DELETE FROM early_reports WHERE carrier = :carrier AND carrier_message_id = :message_id"
)
_FIND = Sql(
    "SELECT 1 AS found FROM erased_receipts WHERE carrier = :carrier AND message_hash = :hash"
    " AND expires_at > :now"
)
_PRUNE = Sql("DELETE FROM erased_receipts WHERE expires_at <= :now")


def _hash(message_id: str) -> str:
    return hashlib.sha256(message_id.encode()).hexdigest()


async def keep(tx: Tx, sent: Iterable[tuple[str, str]], *, now: datetime) -> None:
    """Drop later receipts for these (carrier, message id) pairs, and any parked already."""
    until = now + WINDOW
    for carrier, message_id in sent:
        await tx.execute(_KEEP, {"carrier": carrier, "hash": _hash(message_id), "until": until})
        await tx.execute(_FORGET_EARLY, {"carrier": carrier, "message_id": message_id})


async def erased(tx: Tx, carrier: str, message_id: str, *, now: datetime) -> bool:
    """Whether this receipt is for an erased attempt."""
    params = {"carrier": carrier, "hash": _hash(message_id), "now": now}
    return await tx.fetchrow(_FIND, params) is not None


async def prune(tx: Tx, *, now: datetime) -> int:
    return await tx.execute(_PRUNE, {"now": now})
