"""Receipts that overtook the recording of their submit, parked until it lands.

A carrier may report delivery before the transaction that records the submit
(and so the carrier's message id) has committed, in this process or another.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, insert, select

from relay.carriers.base import DeliveryReport, ReportStatus
from relay.db.prepared import Prepared
from relay.db.tables import attempts, early_reports

A = attempts.c
R = early_reports.c

_PARK = insert(early_reports)
_TAKE_EARLY = Prepared(
    select(R.id, R.carrier, R.carrier_message_id, R.status, R.error_code, R.at).where(
        R.carrier == bindparam("carrier"),
        R.carrier_message_id == bindparam("carrier_message_id"),
    )
)


def park(conn: Connection, report: DeliveryReport, *, now: datetime) -> None:
    """Keep a receipt whose message id no attempt carries yet."""
    conn.execute(
        _PARK,
        {
            "carrier": report.carrier,
            "carrier_message_id": report.carrier_message_id,
            "status": report.status,
            "error_code": report.error_code,
            "at": report.at,
            "received_at": now,
        },
    )


def _report(row: Any) -> DeliveryReport:
    status: ReportStatus = "delivered" if row.status == "delivered" else "failed"
    return DeliveryReport(
        carrier=row.carrier,
        carrier_message_id=row.carrier_message_id,
        status=status,
        error_code=row.error_code,
        at=row.at,
    )


def take(conn: Connection, carrier: str, carrier_message_id: str) -> DeliveryReport | None:
    """The parked receipt for this message id, removed from the parking table."""
    params = {"carrier": carrier, "carrier_message_id": carrier_message_id}
    rows = _TAKE_EARLY.execute(conn, params).all()
    if not rows:
        return None
    conn.execute(delete(early_reports).where(R.id.in_([r.id for r in rows])))
    return _report(rows[0])


def matched(conn: Connection, *, limit: int) -> list[DeliveryReport]:
    """Parked receipts whose attempt has since recorded its message id (a cross-process race)."""
    matched = (
        select(R.id, R.carrier, R.carrier_message_id, R.status, R.error_code, R.at)
        .join(
            attempts,
            and_(A.carrier == R.carrier, A.carrier_message_id == R.carrier_message_id),
        )
        .limit(limit)
    )
    rows = list(conn.execute(matched))
    if rows:
        conn.execute(delete(early_reports).where(R.id.in_([r.id for r in rows])))
    return [_report(r) for r in rows]


def prune(conn: Connection, *, before: datetime) -> int:
    """Receipts nobody claimed for a day are for SMS this database never sent."""
    return conn.execute(delete(early_reports).where(R.received_at < before)).rowcount
