"""SQL for attempts: plain functions of a Connection.

Every attempt transition is one conditional UPDATE that restates the state it
leaves (`WHERE status = 'sent'`), so a receipt and a receipt deadline, or two
dispatchers, racing on one attempt cannot both win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    insert,
    select,
    update,
)

from relay.db.prepared import Prepared
from relay.db.tables import UtcDateTime, attempts, early_reports, in_state
from relay.delivery.attempts import AttemptStatus
from relay.delivery.owners import OwnerRef
from relay.ids import new_id

A = attempts.c
R = early_reports.c

_NOW = bindparam("now", type_=UtcDateTime())


@dataclass(frozen=True)
class AttemptRow:
    id: str
    verification_id: str | None
    message_id: str | None
    carrier: str
    status: AttemptStatus
    route: tuple[str, ...]
    position: int
    carrier_message_id: str | None

    @property
    def owner(self) -> OwnerRef:
        if self.verification_id is not None:
            return OwnerRef("verification", self.verification_id)
        assert self.message_id is not None  # the insert always sets exactly one
        return OwnerRef("message", self.message_id)


_ROW_COLUMNS = (
    A.id,
    A.verification_id,
    A.message_id,
    A.carrier,
    A.status,
    A.route,
    A.position,
    A.carrier_message_id,
)


def _row(row: Any) -> AttemptRow:
    return AttemptRow(
        id=row.id,
        verification_id=row.verification_id,
        message_id=row.message_id,
        carrier=row.carrier,
        status=AttemptStatus(row.status),
        route=tuple(row.route or (row.carrier,)),
        position=row.position,
        carrier_message_id=row.carrier_message_id,
    )


_INSERT = Prepared(insert(attempts))
_LOAD = Prepared(select(*_ROW_COLUMNS).where(A.id == bindparam("attempt_id")))
_BY_CARRIER_ID = Prepared(
    select(*_ROW_COLUMNS).where(
        A.carrier == bindparam("carrier"),
        A.carrier_message_id == bindparam("carrier_message_id"),
    )
)
_FROM_QUEUED = update(attempts).where(
    A.id == bindparam("attempt_id"), A.status == AttemptStatus.QUEUED.value
)
# Out of a dispatcher's hands: no lease, no owner.
_RELEASED = {"lease_until": None, "lease_owner": None, "updated_at": _NOW}
_RECORD_SENT = Prepared(
    _FROM_QUEUED.values(
        status=AttemptStatus.SENT.value,
        carrier_message_id=bindparam("carrier_message_id"),
        report_due_at=bindparam("report_due_at", type_=UtcDateTime()),
        **_RELEASED,
    )
)
# Sent and delivered in one step: a carrier that answered with a final receipt
# at once (the sandbox).
_RECORD_DELIVERED = Prepared(
    _FROM_QUEUED.values(
        status=AttemptStatus.DELIVERED.value,
        carrier_message_id=bindparam("carrier_message_id"),
        error=None,
        report_due_at=None,
        **_RELEASED,
    )
)
_FINISH = Prepared(
    update(attempts)
    .where(A.id == bindparam("attempt_id"), A.status == bindparam("from_status"))
    .values(
        status=bindparam("to_status"),
        error=bindparam("error_json", type_=A.error.type),
        report_due_at=None,
        **_RELEASED,
    )
)
_POSTPONE = Prepared(
    _FROM_QUEUED.values(lease_until=bindparam("until", type_=UtcDateTime()), lease_owner=None)
)


def insert_queued(
    conn: Connection,
    attempt: AttemptRow,
    *,
    now: datetime,
    lease_owner: str | None,
    lease_until: datetime,
) -> None:
    """A queued attempt; its lease keeps other dispatchers off it until `lease_until`."""
    _INSERT.execute(
        conn,
        {
            "id": attempt.id,
            "verification_id": attempt.verification_id,
            "message_id": attempt.message_id,
            "carrier": attempt.carrier,
            "status": AttemptStatus.QUEUED.value,
            "error": None,
            "at": now,
            "updated_at": now,
            "route": list(attempt.route),
            "position": attempt.position,
            "lease_owner": lease_owner,
            "lease_until": lease_until,
        },
    )


def queued(owner: OwnerRef, route: tuple[str, ...], position: int) -> AttemptRow:
    """A new attempt on the route's carrier at `position`, not written yet."""
    return AttemptRow(
        id=new_id("att"),
        verification_id=owner.id if owner.kind == "verification" else None,
        message_id=owner.id if owner.kind == "message" else None,
        carrier=route[position],
        status=AttemptStatus.QUEUED,
        route=route,
        position=position,
        carrier_message_id=None,
    )


def load(conn: Connection, attempt_id: str) -> AttemptRow | None:
    row = _LOAD.execute(conn, {"attempt_id": attempt_id}).first()
    return None if row is None else _row(row)


def by_carrier_message(
    conn: Connection, carrier: str, carrier_message_id: str
) -> AttemptRow | None:
    params = {"carrier": carrier, "carrier_message_id": carrier_message_id}
    row = _BY_CARRIER_ID.execute(conn, params).first()
    return None if row is None else _row(row)


def record_sent(
    conn: Connection,
    attempt_id: str,
    *,
    carrier_message_id: str,
    report_due_at: datetime,
    now: datetime,
) -> bool:
    params = {
        "attempt_id": attempt_id,
        "carrier_message_id": carrier_message_id,
        "report_due_at": report_due_at,
        "now": now,
    }
    return _RECORD_SENT.execute(conn, params).rowcount == 1


def record_delivered(
    conn: Connection, attempt_id: str, *, carrier_message_id: str, now: datetime
) -> bool:
    """A queued attempt whose submit came back delivered; false if the lease was lost."""
    params = {"attempt_id": attempt_id, "carrier_message_id": carrier_message_id, "now": now}
    return _RECORD_DELIVERED.execute(conn, params).rowcount == 1


def finish(
    conn: Connection,
    attempt_id: str,
    *,
    from_status: AttemptStatus,
    to_status: AttemptStatus,
    error: dict[str, Any] | None,
    now: datetime,
) -> bool:
    """Move an attempt out of `from_status`; false if something else moved it first."""
    params = {
        "attempt_id": attempt_id,
        "from_status": from_status.value,
        "to_status": to_status.value,
        "error_json": error,
        "now": now,
    }
    return _FINISH.execute(conn, params).rowcount == 1


def postpone(conn: Connection, attempt_id: str, *, until: datetime) -> None:
    """Throttled: the attempt stays queued, free for any dispatcher from `until` on."""
    _POSTPONE.execute(conn, {"attempt_id": attempt_id, "until": until})


def claim_queued(
    conn: Connection,
    *,
    now: datetime,
    owner: str,
    lease_until: datetime,
    limit: int,
    busy: Sequence[str] = (),
) -> list[str]:
    """Lease queued attempts whose lease has passed (new, throttled, or a dead owner's).

    PostgreSQL skips rows another claimer holds (SKIP LOCKED); SQLite's write
    transaction already excludes other writers. The UPDATE restates the rule.
    """
    due = select(A.id).where(in_state(A.status, AttemptStatus.QUEUED), A.lease_until <= now)
    if busy:
        due = due.where(A.id.not_in(list(busy)))
    due = due.order_by(A.lease_until).limit(limit)
    if conn.dialect.name == "postgresql":
        due = due.with_for_update(skip_locked=True)
    ids = list(conn.execute(due).scalars())
    if not ids:
        return []
    claimed = conn.execute(
        update(attempts)
        .where(A.id.in_(ids), A.status == AttemptStatus.QUEUED.value, A.lease_until <= now)
        .values(lease_owner=owner, lease_until=lease_until)
        .returning(A.id)
    )
    return list(claimed.scalars())


def overdue_reports(conn: Connection, *, now: datetime, limit: int) -> list[AttemptRow]:
    """Sent attempts whose receipt deadline has passed."""
    due = (
        select(*_ROW_COLUMNS)
        .where(in_state(A.status, AttemptStatus.SENT), A.report_due_at <= now)
        .order_by(A.report_due_at)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        due = due.with_for_update(skip_locked=True)
    return [_row(r) for r in conn.execute(due)]


# --- cheap looks before a write transaction --------------------------------------
# The dispatch loop polls; on SQLite every write transaction takes the one
# write lock, so each round first looks, read-only, whether there is work.

_ANY_CLAIMABLE = Prepared(
    select(A.id).where(in_state(A.status, AttemptStatus.QUEUED), A.lease_until <= _NOW).limit(1)
)
_ANY_OVERDUE = Prepared(
    select(A.id).where(in_state(A.status, AttemptStatus.SENT), A.report_due_at <= _NOW).limit(1)
)
_ANY_EARLY = Prepared(
    select(R.id)
    .join(attempts, and_(A.carrier == R.carrier, A.carrier_message_id == R.carrier_message_id))
    .limit(1)
)


def work_waiting(conn: Connection, *, now: datetime) -> tuple[bool, bool, bool]:
    """(claimable attempts, overdue receipts, parked receipts that now match) exist."""
    params = {"now": now}
    return (
        _ANY_CLAIMABLE.execute(conn, params).first() is not None,
        _ANY_OVERDUE.execute(conn, params).first() is not None,
        _ANY_EARLY.execute(conn).first() is not None,
    )
