"""SQL for attempts, early receipts and usage: plain functions of a Connection.

Every attempt transition is one conditional UPDATE that restates the state it
leaves (`WHERE status = 'sent'`), so a receipt and a receipt deadline, or two
dispatchers, racing on one attempt cannot both win.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from relay.carriers.base import DeliveryReport, ReportStatus
from relay.db.prepared import Prepared
from relay.db.tables import UtcDateTime, attempts, early_reports, in_state, usage
from relay.delivery.attempts import Attempt, AttemptStatus

A = attempts.c
R = early_reports.c
U = usage.c

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
    def subject_id(self) -> str:
        subject = self.verification_id or self.message_id
        assert subject is not None  # the insert always sets exactly one
        return subject


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
    *,
    attempt_id: str,
    carrier: str,
    route: Sequence[str],
    position: int,
    now: datetime,
    lease_owner: str | None,
    lease_until: datetime,
    verification_id: str | None = None,
    message_id: str | None = None,
) -> None:
    """A queued attempt; its lease keeps other dispatchers off it until `lease_until`."""
    _INSERT.execute(
        conn,
        {
            "id": attempt_id,
            "verification_id": verification_id,
            "message_id": message_id,
            "carrier": carrier,
            "status": AttemptStatus.QUEUED.value,
            "error": None,
            "at": now,
            "updated_at": now,
            "route": list(route),
            "position": position,
            "lease_owner": lease_owner,
            "lease_until": lease_until,
        },
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


# --- early receipts ---------------------------------------------------------

_PARK = insert(early_reports)
_TAKE_EARLY = Prepared(
    select(R.id, R.carrier, R.carrier_message_id, R.status, R.error_code, R.at).where(
        R.carrier == bindparam("carrier"),
        R.carrier_message_id == bindparam("carrier_message_id"),
    )
)


def park_report(conn: Connection, report: DeliveryReport, *, now: datetime) -> None:
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


def take_early_report(
    conn: Connection, carrier: str, carrier_message_id: str
) -> DeliveryReport | None:
    """The parked receipt for this message id, removed from the parking table."""
    params = {"carrier": carrier, "carrier_message_id": carrier_message_id}
    rows = _TAKE_EARLY.execute(conn, params).all()
    if not rows:
        return None
    conn.execute(delete(early_reports).where(R.id.in_([r.id for r in rows])))
    return _report(rows[0])


def matched_early_reports(conn: Connection, *, limit: int) -> list[DeliveryReport]:
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


def prune_early_reports(conn: Connection, *, before: datetime) -> int:
    """Receipts nobody claimed for a day are for SMS this database never sent."""
    return conn.execute(delete(early_reports).where(R.received_at < before)).rowcount


# --- usage --------------------------------------------------------------------


def count_usage(
    conn: Connection, *, account_id: str, day: str, country: str, carrier: str, outcome: str
) -> None:
    """One more live send with this outcome: a single upsert, safe under concurrency."""
    key = {
        "account_id": account_id,
        "day": day,
        "country": country,
        "carrier": carrier,
        "outcome": outcome,
    }
    _count_usage_statement(conn.dialect.name).execute(conn, {**key, "count": 1})


_USAGE_KEY = ["account_id", "day", "country", "carrier", "outcome"]


@functools.cache
def _count_usage_statement(dialect: str) -> Prepared:
    """Built once per database kind: it runs for every live attempt that ends."""
    statement = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(usage)
    return Prepared(
        statement.on_conflict_do_update(index_elements=_USAGE_KEY, set_={"count": U.count + 1})
    )


@dataclass(frozen=True)
class UsageRow:
    account_id: str
    day: str
    country: str
    carrier: str
    outcome: str
    count: int


def usage_rows(
    conn: Connection, *, account_id: str | None = None, since: str | None = None
) -> list[UsageRow]:
    query = select(U.account_id, U.day, U.country, U.carrier, U.outcome, U.count)
    if account_id is not None:
        query = query.where(U.account_id == account_id)
    if since is not None:
        query = query.where(U.day >= since)
    query = query.order_by(U.account_id, U.day, U.country, U.carrier, U.outcome)
    return [UsageRow(*r) for r in conn.execute(query)]


def usage_totals(conn: Connection, *, account_id: str) -> dict[str, int]:
    """Outcome → count, all days: for tests and the usage summary line."""
    query = (
        select(U.outcome, func.sum(U.count)).where(U.account_id == account_id).group_by(U.outcome)
    )
    return {outcome: int(total) for outcome, total in conn.execute(query)}


# --- attempts as the API shows them -----------------------------------------

# For loads that join an owner to its attempts in one statement (one owner,
# one round trip): the attempt's columns under names of their own.
JOINED_ATTEMPT_COLUMNS = (
    A.id.label("attempt_id"),
    A.status.label("attempt_status"),
    A.carrier.label("attempt_carrier"),
    A.at.label("attempt_at"),
    A.error.label("attempt_error"),
)
_ATTEMPTS_OF_VERIFICATIONS = (
    select(A.verification_id, *JOINED_ATTEMPT_COLUMNS)
    .where(A.verification_id.in_(bindparam("ids", expanding=True)))
    .order_by(A.verification_id, A.id)
)


def _joined_attempt(row: Any, livemode: bool) -> Attempt:
    return Attempt(
        id=row.attempt_id,
        status=AttemptStatus(row.attempt_status),
        carrier=row.attempt_carrier,
        at=row.attempt_at,
        error=row.attempt_error,
        livemode=livemode,
    )


def joined_attempts(rows: Sequence[Any], *, livemode: bool) -> list[Attempt]:
    """The attempts in rows selected with JOINED_ATTEMPT_COLUMNS (an outer join: none is NULL)."""
    return [_joined_attempt(row, livemode) for row in rows if row.attempt_id is not None]


def attempts_of(
    conn: Connection, ids: Sequence[str], *, livemode: bool
) -> dict[str, list[Attempt]]:
    """Each verification's attempts, oldest first, in one query (for a page of them)."""
    grouped: dict[str, list[Attempt]] = {i: [] for i in ids}
    if not ids:
        return grouped
    for row in conn.execute(_ATTEMPTS_OF_VERIFICATIONS, {"ids": list(ids)}):
        grouped[row.verification_id].append(_joined_attempt(row, livemode))
    return grouped


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
