"""The overview's aggregates, one statement each, over the tables the API writes.

Times are bucketed in SQL: SQLite keeps datetimes as sortable text (julianday
reads it), PostgreSQL as timestamptz (EXTRACT(EPOCH ...)); each statement has
its PostgreSQL text. Percentiles are nearest-rank, from window functions both
databases have (SQLite has no percentile_cont).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relay.console.scope import View, scoped
from relay.db.sql import Row, Sql, Tx, moment_or_none
from relay.retention.rollup import WEBHOOK_OUTCOME


def _both(template: str) -> Sql:
    """`template` with {bucket}, {fbucket} (of a retained row's minute) and {seconds}
    written for each dialect."""
    lite = template.replace("{fbucket}", _LITE_BUCKET.replace("{col}", "f.minute"))
    lite = lite.replace("{bucket}", _LITE_BUCKET)
    lite = lite.replace("{seconds}", "((julianday({end}) - julianday({start})) * 86400)")
    pg = template.replace("{fbucket}", _PG_BUCKET.replace("{col}", "f.minute"))
    pg = pg.replace("{bucket}", _PG_BUCKET)
    pg = pg.replace("{seconds}", "CAST(EXTRACT(EPOCH FROM ({end} - {start})) AS FLOAT)")
    # asyncpg must know :since is a moment wherever it stands.
    pg = pg.replace(":since", "CAST(:since AS TIMESTAMPTZ)")
    return Sql(_columns(lite), postgres=_columns(pg))


def _columns(text: str) -> str:
    return (
        text.replace("{col}", "v.created_at")
        .replace("{end}", "a.updated_at")
        .replace("{start}", "a.at")
    )


_LITE_BUCKET = (
    "CAST((julianday({col}) - julianday(:since)) * 86400 / CAST(:step AS INTEGER) AS INTEGER)"
)
_PG_BUCKET = "CAST(FLOOR(EXTRACT(EPOCH FROM ({col} - :since)) / CAST(:step AS INTEGER)) AS INTEGER)"


_V = scoped("v.account_id", "v.livemode")
_OWNER = scoped("COALESCE(v.account_id, m.account_id)", "COALESCE(v.livemode, m.livemode)")
_ATTEMPTS_FROM = (
    "FROM attempts a LEFT JOIN verifications v ON v.id = a.verification_id"
    " LEFT JOIN messages m ON m.id = a.message_id"
)
_E = scoped("e.account_id", "e.livemode")

# Deleted rows count through `retained_figures` (relay.retention): each figure adds
# the retained groups, by minute, to the live rows. The console's windows start on a
# whole minute, so a retained row falls in the bucket its rows fell in.
_F = scoped("f.account_id", "f.livemode")
_RETAINED = "FROM retained_figures f WHERE f.kind = '{kind}' AND f.minute >= :since AND " + _F
_VERIFICATIONS = _both(
    "SELECT bucket, SUM(created) AS created, SUM(approved) AS approved FROM ("
    "SELECT {bucket} AS bucket, 1 AS created,"
    " CASE WHEN v.approved_at IS NOT NULL THEN 1 ELSE 0 END AS approved"
    f" FROM verifications v WHERE v.created_at >= :since AND {_V}"
    " UNION ALL SELECT {fbucket}, f.n, CASE WHEN f.approved THEN f.n ELSE 0 END"
    f" {_RETAINED.format(kind='verification')}) t GROUP BY bucket ORDER BY bucket"
)
_ATTEMPTS = _both(
    "SELECT carrier, status, SUM(n) AS n, SUM(failovers) AS failovers FROM ("
    "SELECT a.carrier AS carrier, a.status AS status, 1 AS n,"
    " CASE WHEN a.position > 0 THEN 1 ELSE 0 END AS failovers"
    f" {_ATTEMPTS_FROM} WHERE a.at >= :since AND {_OWNER}"
    " UNION ALL SELECT f.carrier, f.status, f.n, CASE WHEN f.failover THEN f.n ELSE 0 END"
    f" {_RETAINED.format(kind='attempt')}) t GROUP BY 1, 2 ORDER BY 1, 2"
)
# Nearest-rank percentiles over weighted rows: a running sum of the weights, peers
# included, reaches n * p at the same seconds as a row number over one row each.
_RECEIPTS = _both(
    "WITH d AS (SELECT a.carrier AS carrier, {seconds} AS s, 1 AS w"
    f" {_ATTEMPTS_FROM} WHERE a.status = 'delivered' AND a.at >= :since AND {_OWNER}"
    " UNION ALL SELECT f.carrier, f.seconds, f.n"
    f" {_RETAINED.format(kind='attempt')} AND f.status = 'delivered'),"
    " r AS (SELECT carrier, s, SUM(w) OVER (PARTITION BY carrier ORDER BY s) AS rn,"
    " SUM(w) OVER (PARTITION BY carrier) AS n FROM d)"
    " SELECT carrier, MAX(n) AS n, MIN(CASE WHEN rn >= n * 0.5 THEN s END) AS p50,"
    " MIN(CASE WHEN rn >= n * 0.95 THEN s END) AS p95 FROM r GROUP BY carrier ORDER BY carrier"
)
_COUNTRIES = _both(
    "SELECT country, SUM(created) AS created, SUM(approved) AS approved FROM ("
    "SELECT v.country AS country, 1 AS created,"
    " CASE WHEN v.approved_at IS NOT NULL THEN 1 ELSE 0 END AS approved"
    f" FROM verifications v WHERE v.created_at >= :since AND {_V}"
    " UNION ALL SELECT f.country, f.n, CASE WHEN f.approved THEN f.n ELSE 0 END"
    f" {_RETAINED.format(kind='verification')}) t GROUP BY 1 ORDER BY 2 DESC, 1"
)
_DELIVERY_BY_COUNTRY = _both(
    "SELECT country, SUM(n) AS attempts, SUM(delivered) AS delivered FROM ("
    "SELECT COALESCE(v.country, m.country) AS country, 1 AS n,"
    " CASE WHEN a.status = 'delivered' THEN 1 ELSE 0 END AS delivered"
    f" {_ATTEMPTS_FROM} WHERE a.at >= :since AND {_OWNER}"
    " UNION ALL SELECT f.country, f.n, CASE WHEN f.status = 'delivered' THEN f.n ELSE 0 END"
    f" {_RETAINED.format(kind='attempt')}) t GROUP BY 1 ORDER BY 2 DESC, 1"
)
_WEBHOOKS = _both(
    "SELECT outcome, SUM(n) AS n FROM (SELECT e.delivery_status AS outcome, 1 AS n FROM events e"
    f" WHERE e.created_at >= :since AND e.delivery_status <> 'none' AND {_E}"
    " UNION ALL SELECT f.status, f.n"
    f" {_RETAINED.format(kind='event')} AND f.status <> 'none') t GROUP BY 1 ORDER BY 1"
)
_WEBHOOK_ATTEMPTS = _both(
    f"SELECT outcome, SUM(n) AS n FROM (SELECT {WEBHOOK_OUTCOME} AS outcome, 1 AS n"
    f" FROM webhook_attempts w JOIN events e ON e.id = w.event_id WHERE w.at >= :since AND {_E}"
    " UNION ALL SELECT f.status, f.n"
    f" {_RETAINED.format(kind='webhook_attempt')}) t GROUP BY 1 ORDER BY 1"
)
_OLDEST_PENDING = Sql(
    "SELECT e.id AS id, e.created_at AS created_at FROM events e"
    f" WHERE e.delivery_status = 'pending' AND {_E} ORDER BY e.created_at, e.id LIMIT 1"
)


@dataclass(frozen=True)
class Overview:
    since: datetime
    step: int
    buckets: int
    # bucket index -> (created, approved)
    verifications: dict[int, tuple[int, int]]
    # (carrier, status, count, failovers)
    attempts: list[tuple[str, str, int, int]]
    # (carrier, delivered count, p50 seconds, p95 seconds)
    receipts: list[tuple[str, int, float, float]]
    # (country, created, approved)
    countries: list[tuple[str, int, int]]
    # (country, attempts, delivered)
    delivery: list[tuple[str, int, int]]
    webhooks: dict[str, int]
    webhook_attempts: dict[str, int]
    oldest_pending: tuple[str, datetime] | None


async def overview(tx: Tx, view: View, *, since: datetime, step: int, buckets: int) -> Overview:
    params: dict[str, Any] = {**view.params(), "since": since, "step": step}

    async def rows(statement: Sql) -> list[Row]:
        return await tx.fetch(statement, params)

    verifications = {
        int(r["bucket"]): (int(r["created"]), int(r["approved"] or 0))
        for r in await rows(_VERIFICATIONS)
    }
    oldest = await tx.fetchrow(_OLDEST_PENDING, view.params())
    pending_at = None if oldest is None else moment_or_none(oldest["created_at"])
    return Overview(
        since=since,
        step=step,
        buckets=buckets,
        verifications=verifications,
        attempts=[
            (r["carrier"], r["status"], int(r["n"]), int(r["failovers"] or 0))
            for r in await rows(_ATTEMPTS)
        ],
        receipts=[
            (r["carrier"], int(r["n"]), float(r["p50"]), float(r["p95"]))
            for r in await rows(_RECEIPTS)
        ],
        countries=[
            (r["country"], int(r["created"]), int(r["approved"] or 0))
            for r in await rows(_COUNTRIES)
        ],
        delivery=[
            (r["country"], int(r["attempts"]), int(r["delivered"] or 0))
            for r in await rows(_DELIVERY_BY_COUNTRY)
        ],
        webhooks={r["outcome"]: int(r["n"]) for r in await rows(_WEBHOOKS)},
        webhook_attempts={r["outcome"]: int(r["n"]) for r in await rows(_WEBHOOK_ATTEMPTS)},
        oldest_pending=None if oldest is None or pending_at is None else (oldest["id"], pending_at),
    )
