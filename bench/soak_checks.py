"""What bench/soak.py asserts of the database after its traffic: each check a query
whose rows are violations (none is the pass), and the settled-state wait before them."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from relay.db.driver import open_db
from relay.db.sql import Sql, Tx


@dataclass(frozen=True)
class Check:
    name: str
    sql: str


# `:now` is the check's time; `:grace` how late a due thing may be and still count as
# on its way (a loaded 2-core machine is slow, never stuck for this long). Conditions
# on nullable columns are written so that NULL makes a row a violation, not a pass.
CHECKS = [
    Check(
        "at most max_checks checks counted per verification",
        "SELECT id, checks AS found FROM verifications WHERE checks > :max_checks",
    ),
    Check(
        "at most max_sends sends per verification",
        "SELECT id, sends AS found FROM verifications WHERE sends > :max_sends",
    ),
    Check(
        "at most one approval per verification",
        "SELECT related_id AS id, count(*) AS found FROM events"
        " WHERE type = 'verification.approved' GROUP BY related_id HAVING count(*) > 1",
    ),
    Check(
        "every approved verification has its approval event, and only those",
        "SELECT v.id, v.status AS found FROM verifications v"
        " LEFT JOIN events e ON e.related_id = v.id AND e.type = 'verification.approved'"
        " WHERE (v.status = 'approved') <> (e.id IS NOT NULL)",
    ),
    Check(
        "nothing approved after its expiry",
        "SELECT id, approved_at AS found FROM verifications"
        " WHERE approved_at IS NOT NULL AND approved_at > expires_at",
    ),
    Check(
        "no attempt stuck queued or waiting for a receipt",
        "SELECT id, status AS found FROM attempts WHERE"
        " (status = 'queued' AND (lease_until IS NULL OR lease_until < :stale))"
        " OR (status = 'sent' AND (report_due_at IS NULL OR report_due_at < :stale))",
    ),
    Check(
        "every event with a webhook delivered, retrying on time, or dropped after the schedule",
        "SELECT id, delivery_status AS found FROM events WHERE webhook_url IS NOT NULL AND NOT ("
        " delivery_status = 'delivered'"
        " OR (delivery_status = 'pending' AND (coalesce(next_attempt_at >= :stale, false)"
        "  OR coalesce(lease_until >= :now, false)))"
        " OR (delivery_status = 'dropped' AND attempt_count = :attempts_before_drop))",
    ),
    Check(
        "no event to the endpoint that answers 2xx left undelivered",
        "SELECT id, delivery_status AS found FROM events"
        " WHERE webhook_url LIKE '%/ok' AND delivery_status <> 'delivered'",
    ),
    Check(
        "each event's attempt counter equals its recorded attempts",
        "SELECT e.id, e.attempt_count AS found FROM events e"
        " LEFT JOIN webhook_attempts w ON w.event_id = e.id"
        # A claimed attempt is counted when claimed and recorded when it ends.
        " WHERE e.lease_until IS NULL OR e.lease_until < :now"
        " GROUP BY e.id, e.attempt_count HAVING e.attempt_count <> count(w.id)",
    ),
    Check(
        "live usage counts every delivered live attempt once",
        "SELECT 'delivered' AS id, (SELECT coalesce(sum(count), 0) FROM usage"
        " WHERE outcome = 'delivered') AS found"
        " WHERE (SELECT coalesce(sum(count), 0) FROM usage WHERE outcome = 'delivered') <>"
        " (SELECT count(*) FROM attempts a"
        "  LEFT JOIN verifications v ON v.id = a.verification_id"
        "  LEFT JOIN messages m ON m.id = a.message_id"
        "  WHERE a.status = 'delivered' AND coalesce(v.livemode, m.livemode))",
    ),
]

_UNSETTLED = Sql(
    "SELECT (SELECT count(*) FROM attempts WHERE status IN ('queued', 'sent'))"
    " + (SELECT count(*) FROM events WHERE delivery_status = 'pending') AS n"
)
_TOTALS = {
    "verifications": "SELECT count(*) AS n FROM verifications",
    "messages": "SELECT count(*) AS n FROM messages",
    "attempts": "SELECT count(*) AS n FROM attempts",
    "failed attempts (failovers)": "SELECT count(*) AS n FROM attempts WHERE status = 'failed'",
    "events": "SELECT count(*) AS n FROM events",
    "webhook attempts": "SELECT count(*) AS n FROM webhook_attempts",
    "events dropped after the schedule": (
        "SELECT count(*) AS n FROM events WHERE delivery_status = 'dropped'"
    ),
}


@dataclass(frozen=True)
class Verdict:
    violations: dict[str, list[Any]]
    totals: dict[str, int]
    unsettled: int


def _params(max_checks: int, max_sends: int, schedule: int, grace: float) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "max_checks": max_checks,
        "max_sends": max_sends,
        "attempts_before_drop": schedule + 1,
        "now": now,
        "stale": now - timedelta(seconds=grace),
    }


async def _unsettled(tx: Tx) -> int:
    row = await tx.fetchrow(_UNSETTLED)
    return 0 if row is None else int(row["n"])


async def verdict(
    database_url: str,
    *,
    max_checks: int,
    max_sends: int,
    schedule: int,
    grace: float,
    settle_within: float,
) -> Verdict:
    """Waits up to `settle_within` s for work in flight to finish, then runs every check."""
    db = open_db(database_url)
    try:
        deadline = time.monotonic() + settle_within
        unsettled = await db.read(_unsettled)
        while unsettled and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            unsettled = await db.read(_unsettled)
        params = _params(max_checks, max_sends, schedule, grace)

        async def run_checks(tx: Tx) -> tuple[dict[str, list[Any]], dict[str, int]]:
            found: dict[str, list[Any]] = {}
            for check in CHECKS:
                rows = await tx.fetch(Sql(check.sql), params)
                found[check.name] = [(row["id"], row["found"]) for row in rows]
            totals: dict[str, int] = {}
            for name, sql in _TOTALS.items():
                row = await tx.fetchrow(Sql(sql))
                totals[name] = 0 if row is None else int(row["n"])
            return found, totals

        violations, totals = await db.read(run_checks)
        return Verdict(violations, totals, unsettled)
    finally:
        await db.close()
