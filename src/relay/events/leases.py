"""Giving webhook attempts back at shutdown: claimed, cancelled before an answer.

A claim counted the attempt (`attempt_count + 1`) and leased the row. An
attempt cancelled by a stop has no answer to record, so the claim is undone:
the count goes back and the lease is cleared, and the next claim anywhere
makes that attempt again without waiting for the lease or counting a lost one.
"""

from __future__ import annotations

from collections.abc import Sequence

from relay.db.sql import Sql, Tx
from relay.events.store import Claim

# The owner and the count in the WHERE: a row another worker took over after
# this lease ran out is theirs now.
_UNCLAIM = Sql(
    "UPDATE events SET attempt_count = attempt_count - 1, lease_until = NULL, lease_owner = NULL"
    " WHERE id = :event_id AND lease_owner = :owner AND attempt_count = :number"
    " AND delivery_status = 'pending'"
)


async def release(tx: Tx, claims: Sequence[Claim]) -> int:
    released = 0
    for claim in claims:
        params = {"event_id": claim.event_id, "owner": claim.owner, "number": claim.number}
        released += await tx.execute(_UNCLAIM, params)
    return released
