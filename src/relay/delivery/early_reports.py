"""Receipts that overtook the recording of their submit, parked until it lands.

A carrier may report delivery before the transaction that records the submit
(and so the carrier's message id) has committed, in this process or another.
"""

from __future__ import annotations

from datetime import datetime

from relay.carriers.base import DeliveryReport, ReportStatus
from relay.db.sql import Row, Sql, Tx, moment

_PARK = Sql(
    "INSERT INTO early_reports (carrier, carrier_message_id, status, error_code, at,"
    " received_at) VALUES (:carrier, :carrier_message_id, :status, :error_code, :at, :now)"
)
# Taken and removed in one statement: a receipt is applied once.
_TAKE_EARLY = Sql(
    "DELETE FROM early_reports WHERE carrier = :carrier"
    " AND carrier_message_id = :carrier_message_id"
    " RETURNING carrier, carrier_message_id, status, error_code, at"
)
_TAKE_MATCHED = Sql(
    "DELETE FROM early_reports WHERE id IN (SELECT r.id FROM early_reports r JOIN attempts a"
    " ON a.carrier = r.carrier AND a.carrier_message_id = r.carrier_message_id LIMIT :limit)"
    " RETURNING carrier, carrier_message_id, status, error_code, at"
)
_PRUNE = Sql("DELETE FROM early_reports WHERE received_at < :before")


async def park(tx: Tx, report: DeliveryReport, *, now: datetime) -> None:
    """Keep a receipt whose message id no attempt carries yet."""
    await tx.execute(
        _PARK,
        {
            "carrier": report.carrier,
            "carrier_message_id": report.carrier_message_id,
            "status": report.status,
            "error_code": report.error_code,
            "at": report.at,
            "now": now,
        },
    )


def _report(row: Row) -> DeliveryReport:
    status: ReportStatus = "delivered" if row["status"] == "delivered" else "failed"
    return DeliveryReport(
        carrier=row["carrier"],
        carrier_message_id=row["carrier_message_id"],
        status=status,
        error_code=row["error_code"],
        at=moment(row["at"]),
    )


async def take(tx: Tx, carrier: str, carrier_message_id: str) -> DeliveryReport | None:
    """The parked receipt for this message id, removed from the parking table."""
    params = {"carrier": carrier, "carrier_message_id": carrier_message_id}
    rows = await tx.fetch(_TAKE_EARLY, params)
    return _report(rows[0]) if rows else None


async def matched(tx: Tx, *, limit: int) -> list[DeliveryReport]:
    """Parked receipts whose attempt has since recorded its message id (a cross-process race)."""
    return [_report(r) for r in await tx.fetch(_TAKE_MATCHED, {"limit": limit})]


async def prune(tx: Tx, *, before: datetime) -> int:
    """Receipts nobody claimed for a day are for SMS this database never sent."""
    return await tx.execute(_PRUNE, {"before": before})
