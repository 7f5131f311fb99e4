"""The outbox: an event row is written in the transaction of the change it reports."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, Row, bindparam, insert, or_, select, update
from sqlalchemy.sql import ColumnElement

from relay.clock import isoformat
from relay.db.prepared import Prepared
from relay.db.tables import UtcDateTime, events, in_state, webhook_attempts
from relay.events.models import DeliveryStatus, EventType, NewEvent

# Connection flag: this transaction wrote an event that has a webhook to deliver.
RECORDED = "relay.events.recorded"


# Built once: it runs in every state-changing transaction.
_INSERT_EVENT = Prepared(insert(events))


def record(
    conn: Connection, event: NewEvent, *, account_id: str, related_id: str, webhook_url: str | None
) -> None:
    _INSERT_EVENT.execute(
        conn,
        {
            "id": event.id,
            "account_id": account_id,
            "livemode": event.livemode,
            "type": event.type.value,
            "related_id": related_id,
            "payload": orjson.dumps(event.envelope()).decode(),
            "webhook_url": webhook_url,
            "delivery_status": (
                DeliveryStatus.PENDING if webhook_url else DeliveryStatus.NONE
            ).value,
            "created_at": event.created_at,
            "next_attempt_at": event.created_at if webhook_url else None,
        },
    )
    if webhook_url:
        # Read after commit by relay.events.service.Outbox to wake the delivery loop.
        conn.info[RECORDED] = True


# --- delivery: claim, record ------------------------------------------------

E = events.c
WORKER_LOST = "worker_lost"


@dataclass(frozen=True)
class Claim:
    """One delivery attempt a worker holds the lease for."""

    event_id: str
    account_id: str
    webhook_url: str
    payload: bytes
    number: int  # 1 for the first attempt
    owner: str


@dataclass(frozen=True)
class AttemptRecord:
    at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int | None


def _leasable(now: datetime) -> ColumnElement[bool]:
    return or_(E.lease_until.is_(None), E.lease_until <= now)


def any_due(conn: Connection, *, now: datetime) -> bool:
    """Whether some delivery is due, leased or not (a dead worker's lease may be over)."""
    return _ANY_DUE.execute(conn, {"now": now}).first() is not None


# The claim runs every time the delivery loop wakes: its statements are built once.
_NOW = bindparam("now", type_=UtcDateTime())
_ANY_DUE = Prepared(
    select(E.id)
    .where(in_state(E.delivery_status, DeliveryStatus.PENDING), E.next_attempt_at <= _NOW)
    .limit(1)
)
_LEASABLE_NOW = or_(E.lease_until.is_(None), E.lease_until <= _NOW)
_CLAIM = (
    update(events)
    .where(
        E.id.in_(bindparam("ready", expanding=True)),
        E.delivery_status == DeliveryStatus.PENDING,
        _LEASABLE_NOW,
    )
    .values(
        attempt_count=E.attempt_count + 1,
        lease_owner=bindparam("owner"),
        lease_until=bindparam("lease_ends"),
    )
    .returning(E.id, E.account_id, E.webhook_url, E.payload, E.attempt_count)
)


@functools.cache
def _due_statement(dialect: str, *, busy: bool) -> Any:
    due = select(E.id, E.attempt_count, E.lease_until).where(
        in_state(E.delivery_status, DeliveryStatus.PENDING),
        E.next_attempt_at <= _NOW,
        _LEASABLE_NOW,
    )
    if busy:
        due = due.where(E.id.not_in(bindparam("busy", expanding=True)))
    due = due.order_by(E.next_attempt_at).limit(bindparam("limit"))
    if dialect == "postgresql":
        due = due.with_for_update(skip_locked=True)
    return due


def claim_due(
    conn: Connection,
    *,
    now: datetime,
    owner: str,
    lease_until: datetime,
    limit: int,
    max_attempts: int,
    busy: Collection[str] = (),
) -> list[Claim]:
    """Lease up to `limit` due deliveries to `owner`; atomic against other workers.

    On PostgreSQL the due rows are locked with SKIP LOCKED, so a concurrent
    claimer takes other rows instead of waiting; on SQLite the write
    transaction (BEGIN IMMEDIATE) already excludes every other writer. The
    UPDATE restates the due condition either way.
    """
    statement = _due_statement(conn.dialect.name, busy=bool(busy))
    params: dict[str, Any] = {"now": now, "limit": limit}
    if busy:
        params["busy"] = list(busy)
    rows = list(conn.execute(statement, params))
    for row in rows:
        if row.lease_until is not None:
            # Leased, never recorded, lease over: the worker died mid-attempt.
            _insert_attempt(
                conn, row.id, row.attempt_count, AttemptRecord(now, None, WORKER_LOST, None)
            )
    _drop(conn, [r.id for r in rows if r.attempt_count >= max_attempts], now=now)
    ready = [r.id for r in rows if r.attempt_count < max_attempts]
    if not ready:
        return []
    claimed = conn.execute(
        _CLAIM, {"ready": ready, "now": now, "owner": owner, "lease_ends": lease_until}
    )
    return [
        Claim(r.id, r.account_id, r.webhook_url, r.payload.encode(), r.attempt_count, owner)
        for r in claimed
    ]


def _drop(conn: Connection, ids: Sequence[str], *, now: datetime) -> None:
    if ids:
        conn.execute(
            update(events)
            .where(E.id.in_(ids), E.delivery_status == DeliveryStatus.PENDING, _leasable(now))
            .values(
                delivery_status=DeliveryStatus.DROPPED,
                next_attempt_at=None,
                lease_until=None,
                lease_owner=None,
            )
        )


# Built once: they run for every webhook attempt.
_RECORD_ATTEMPT = Prepared(
    update(events)
    .where(
        E.id == bindparam("event_id"),
        E.lease_owner == bindparam("owner"),
        E.attempt_count == bindparam("number"),
        E.delivery_status == DeliveryStatus.PENDING,
    )
    .values(
        delivery_status=bindparam("outcome"),
        next_attempt_at=bindparam("next_attempt_at"),
        lease_until=None,
        lease_owner=None,
    )
)
_INSERT_ATTEMPT = Prepared(insert(webhook_attempts))


def record_attempt(
    conn: Connection,
    claim: Claim,
    attempt: AttemptRecord,
    *,
    outcome: DeliveryStatus,
    next_attempt_at: datetime | None,
) -> bool:
    """Store how an attempt ended; False when the lease was lost to another worker."""
    # The lease owner in the WHERE: a worker that overran its lease must not
    # overwrite the state written by the worker that took the row over.
    result = _RECORD_ATTEMPT.execute(
        conn,
        {
            "event_id": claim.event_id,
            "owner": claim.owner,
            "number": claim.number,
            "outcome": outcome,
            "next_attempt_at": next_attempt_at,
        },
    )
    if result.rowcount != 1:
        return False
    _insert_attempt(conn, claim.event_id, claim.number, attempt)
    return True


def _insert_attempt(conn: Connection, event_id: str, number: int, attempt: AttemptRecord) -> None:
    _INSERT_ATTEMPT.execute(
        conn,
        {
            "event_id": event_id,
            "number": number,
            "at": attempt.at,
            "status_code": attempt.status_code,
            "error": attempt.error,
            "duration_ms": attempt.duration_ms,
        },
    )


# --- reading: the events API -------------------------------------------------


@dataclass(frozen=True)
class StoredEvent:
    id: str
    type: EventType
    payload: str
    webhook_url: str | None
    delivery_status: DeliveryStatus
    attempts: tuple[AttemptRecord, ...]

    def to_api(self) -> dict[str, Any]:
        envelope: dict[str, Any] = orjson.loads(self.payload)
        return {
            **envelope,
            "delivery_status": self.delivery_status.value,
            "webhook_url": self.webhook_url,
            "delivery_attempts": [_attempt_api(a) for a in self.attempts],
        }


def _attempt_api(attempt: AttemptRecord) -> dict[str, Any]:
    return {
        "at": isoformat(attempt.at),
        "status_code": attempt.status_code,
        "error": attempt.error,
        "duration_ms": attempt.duration_ms,
    }


@dataclass(frozen=True)
class EventQuery:
    limit: int
    starting_after: str | None = None
    ending_before: str | None = None
    related: str | None = None
    type: EventType | None = None
    delivery_status: DeliveryStatus | None = None


def _scope(account_id: str, livemode: bool) -> list[ColumnElement[bool]]:
    return [E.account_id == account_id, E.livemode == livemode]


_COLUMNS = [E.id, E.type, E.payload, E.webhook_url, E.delivery_status]


def load(conn: Connection, *, account_id: str, livemode: bool, event_id: str) -> StoredEvent | None:
    row = conn.execute(
        select(*_COLUMNS).where(*_scope(account_id, livemode), E.id == event_id)
    ).first()
    if row is None:
        return None
    return _from_row(row, _attempts_for(conn, [row.id])[row.id])


def list_page(
    conn: Connection, *, account_id: str, livemode: bool, query: EventQuery
) -> tuple[list[StoredEvent], bool]:
    """Newest first, keyset-paginated on the time-sortable id, like verifications."""
    conditions = _scope(account_id, livemode)
    if query.related is not None:
        conditions.append(E.related_id == query.related)
    if query.type is not None:
        conditions.append(E.type == query.type.value)
    if query.delivery_status is not None:
        conditions.append(E.delivery_status == query.delivery_status.value)
    if query.starting_after is not None:
        conditions.append(E.id < query.starting_after)
    backwards = query.ending_before is not None
    if query.ending_before is not None:
        conditions.append(E.id > query.ending_before)
    order = E.id.asc() if backwards else E.id.desc()
    rows = list(
        conn.execute(select(*_COLUMNS).where(*conditions).order_by(order).limit(query.limit + 1))
    )
    has_more = len(rows) > query.limit
    rows = rows[: query.limit]
    if backwards:
        rows.reverse()
    grouped = _attempts_for(conn, [r.id for r in rows])
    return [_from_row(r, grouped[r.id]) for r in rows], has_more


def _from_row(row: Row[Any], attempts: Sequence[AttemptRecord]) -> StoredEvent:
    return StoredEvent(
        id=row.id,
        type=EventType(row.type),
        payload=row.payload,
        webhook_url=row.webhook_url,
        delivery_status=DeliveryStatus(row.delivery_status),
        attempts=tuple(attempts),
    )


def _attempts_for(conn: Connection, ids: Sequence[str]) -> dict[str, list[AttemptRecord]]:
    grouped: dict[str, list[AttemptRecord]] = {i: [] for i in ids}
    if not ids:
        return grouped
    attempt = webhook_attempts.c
    query = (
        select(webhook_attempts)
        .where(attempt.event_id.in_(ids))
        .order_by(attempt.event_id, attempt.number, attempt.id)
    )
    for row in conn.execute(query):
        grouped[row.event_id].append(
            AttemptRecord(row.at, row.status_code, row.error, row.duration_ms)
        )
    return grouped
