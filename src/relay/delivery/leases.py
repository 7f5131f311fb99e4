"""Giving SMS attempts back at shutdown, so another dispatcher takes them at once.

A stopping process still holds leases on queued attempts: those it created
and had not submitted yet, and those whose submit it cancelled when its grace
ran out. Left alone they wait out the lease (`dispatch_lease`) before any
other process may submit them; released, they are due now.
"""

from __future__ import annotations

from datetime import datetime

from relay.db.sql import Sql, Tx

_RELEASE = Sql(
    "UPDATE attempts SET lease_until = :now, lease_owner = NULL, updated_at = :now"
    " WHERE lease_owner = :owner AND status = 'queued'"
)


async def release(tx: Tx, *, owner: str, now: datetime) -> int:
    """Every queued attempt `owner` holds, due now and held by nobody; how many."""
    return await tx.execute(_RELEASE, {"owner": owner, "now": now})
