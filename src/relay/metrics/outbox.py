"""What waits to go out, read when `/metrics` is scraped: SMS attempts not yet handed
to a carrier, and events whose webhook is not yet delivered.

One query per kind, over the partial index that keeps only the waiting rows
(`ix_attempts_queued`, `ix_events_endpoint_due`): its cost grows with the backlog, not
with the tables. Read at scrape time rather than kept by the loops, so every
process answers the same figures, whichever loops it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from relay.db.sql import Sql, Tx, moment_or_none

_QUERIES = {
    "sms": Sql("SELECT count(*) AS depth, min(at) AS oldest FROM attempts WHERE status = 'queued'"),
    "webhook": Sql(
        "SELECT count(*) AS depth, min(created_at) AS oldest FROM events"
        " WHERE delivery_status = 'pending'"
    ),
}


@dataclass(frozen=True)
class Backlog:
    kind: str
    depth: int
    # Seconds the oldest waiting item has waited (0 when none waits).
    oldest_seconds: float


async def backlogs(tx: Tx, *, now: datetime) -> list[Backlog]:
    found = []
    for kind, query in _QUERIES.items():
        row = await tx.fetchrow(query)
        depth = 0 if row is None else int(row["depth"])
        oldest = None if row is None else moment_or_none(row["oldest"])
        waited = 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())
        found.append(Backlog(kind, depth, waited))
    return found
