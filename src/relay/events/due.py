"""Finding and leasing due webhook deliveries, one endpoint at a time.

The delivery loop caps the attempts in flight per endpoint, and an endpoint at
its cap may have any number of due deliveries behind it. A claim that looked
for due rows across every endpoint, oldest first, walked that whole backlog to
find none it could take, and ran again each time a few slots freed, so the
loop spent itself on reading the rows it could not send. Each event therefore
carries its endpoint (`relay.webhooks.guard.endpoint` of its URL, written with
the row), the partial index ix_events_endpoint_due orders each endpoint's
pending rows by when they are due, and a claim lists the endpoints that have
something due (a few index seeks per endpoint), then reads from each endpoint
that has room no more rows than its free slots. A full endpoint's rows are not
read at all.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from relay.db.sql import Row, Sql, Tx
from relay.events.store import Claim
from relay.webhooks.guard import endpoint

WORKER_LOST = "worker_lost"

_LEASABLE = "(lease_until IS NULL OR lease_until <= :now)"
# From one endpoint to the next by a seek in ix_events_endpoint_due, never through
# an endpoint's own rows (a loose index scan); then each endpoint's earliest
# pending row, by one more seek. Endpoints whose earliest is due, earliest first:
# the order the claim serves them in, so an endpoint waiting longest goes first.
_DUE_ENDPOINTS = Sql(
    "WITH RECURSIVE pending(endpoint) AS ("
    " SELECT (SELECT endpoint FROM events WHERE delivery_status = 'pending'"
    " AND endpoint IS NOT NULL ORDER BY endpoint LIMIT 1)"
    " UNION ALL SELECT (SELECT e.endpoint FROM events e WHERE e.delivery_status = 'pending'"
    " AND e.endpoint > p.endpoint ORDER BY e.endpoint LIMIT 1)"
    " FROM pending p WHERE p.endpoint IS NOT NULL)"
    " SELECT endpoint FROM (SELECT p.endpoint, (SELECT e.next_attempt_at FROM events e"
    " WHERE e.delivery_status = 'pending' AND e.endpoint = p.endpoint"
    " ORDER BY e.next_attempt_at LIMIT 1) AS due_at FROM pending p"
    " WHERE p.endpoint IS NOT NULL) AS d WHERE due_at <= :now ORDER BY due_at, endpoint"
)
# The state is written as a constant: the partial index serves only that.
_OF_ENDPOINT = (
    "SELECT id, attempt_count, lease_until FROM events WHERE delivery_status = 'pending'"
    " AND endpoint = :endpoint AND next_attempt_at <= :now AND " + _LEASABLE + " AND id NOT IN"
    " ({busy}) ORDER BY next_attempt_at LIMIT :limit"
)
_CANDIDATES = Sql(
    _OF_ENDPOINT.format(busy="SELECT value FROM json_each(:busy)"),
    postgres=_OF_ENDPOINT.format(busy="SELECT json_array_elements_text(CAST(:busy AS json))")
    + " FOR UPDATE SKIP LOCKED",
)
# Written during a rolling upgrade by a process older than migration 0010, which
# does not know the column: without it the row would never be claimed.
_UNKEYED = Sql(
    "SELECT id, webhook_url FROM events WHERE delivery_status = 'pending' AND endpoint IS NULL"
    " LIMIT :limit"
)
_KEY = Sql("UPDATE events SET endpoint = :endpoint WHERE id = :id AND endpoint IS NULL")
_IDS = "id IN (SELECT value FROM json_each(:ids))"
_PG_IDS = "id = ANY(ARRAY(SELECT json_array_elements_text(CAST(:ids AS json))))"
# The rows were read in this transaction, under FOR UPDATE on PostgreSQL and
# the write lock on SQLite, so they are still pending: the state is not restated,
# only the lease. Stating it let the partial index on pending rows serve the
# statement, and on a table without statistics PostgreSQL read every pending
# row through it to find the few ids.
_TAKE = (
    "UPDATE events SET attempt_count = attempt_count + 1, lease_owner = :owner,"
    " lease_until = :lease_until WHERE {ids} AND "
    + _LEASABLE
    + " RETURNING id, account_id, livemode, webhook_url, payload, attempt_count"
)
_CLAIM = Sql(_TAKE.format(ids=_IDS), postgres=_TAKE.format(ids=_PG_IDS))
_GIVE_UP = (
    "UPDATE events SET delivery_status = 'dropped', next_attempt_at = NULL, lease_until = NULL,"
    " lease_owner = NULL WHERE {ids} AND " + _LEASABLE
)
_DROP = Sql(_GIVE_UP.format(ids=_IDS), postgres=_GIVE_UP.format(ids=_PG_IDS))
_LOST = Sql(
    "INSERT INTO webhook_attempts (event_id, number, at, error)"
    f" VALUES (:id, :number, :now, '{WORKER_LOST}')"
)
UNKEYED_PER_CLAIM = 500


async def due_endpoints(tx: Tx, *, now: datetime) -> list[str]:
    """Endpoints with a delivery due, leased or not (a dead worker's lease may be over),
    the one due longest first."""
    return [row["endpoint"] for row in await tx.fetch(_DUE_ENDPOINTS, {"now": now})]


async def any_unkeyed(tx: Tx) -> bool:
    return await tx.fetchrow(_UNKEYED, {"limit": 1}) is not None


async def key_unkeyed(tx: Tx) -> None:
    """Give pending events written without their endpoint the endpoint of their URL."""
    rows = await tx.fetch(_UNKEYED, {"limit": UNKEYED_PER_CLAIM})
    if rows:
        await tx.executemany(
            _KEY, [{"id": r["id"], "endpoint": endpoint(r["webhook_url"])} for r in rows]
        )


async def candidates(
    tx: Tx, key: str, *, now: datetime, busy: Collection[str], limit: int
) -> list[Row]:
    """Up to `limit` due deliveries to one endpoint, oldest first, skipping the events
    this loop holds.

    On PostgreSQL they are locked with SKIP LOCKED, so a concurrent claimer
    takes other rows instead of waiting; on SQLite the write transaction
    (BEGIN IMMEDIATE) already excludes every other writer.
    """
    params = {"endpoint": key, "now": now, "busy": list(busy), "limit": limit}
    return await tx.fetch(_CANDIDATES, params)


async def take(
    tx: Tx, ids: list[str], *, now: datetime, owner: str, lease_until: datetime
) -> list[Claim]:
    """Lease the deliveries to `owner`; the UPDATE restates that their lease is over."""
    if not ids:
        return []
    params = {"ids": ids, "now": now, "owner": owner, "lease_until": lease_until}
    return [_claim_of(row, owner) for row in await tx.fetch(_CLAIM, params)]


def _claim_of(row: Row, owner: str) -> Claim:
    payload = str(row["payload"]).encode()
    return Claim(
        row["id"],
        row["account_id"],
        row["webhook_url"],
        payload,
        row["attempt_count"],
        owner,
        bool(row["livemode"]),
    )


async def record_lost(tx: Tx, attempts: list[tuple[str, int]], *, now: datetime) -> None:
    """Attempts a worker claimed and never recorded: it died with the lease."""
    if attempts:
        rows = [{"id": event_id, "number": number, "now": now} for event_id, number in attempts]
        await tx.executemany(_LOST, rows)


async def drop(tx: Tx, ids: list[str], *, now: datetime) -> None:
    """Give up on deliveries whose attempts are used up."""
    if ids:
        await tx.execute(_DROP, {"ids": ids, "now": now})
