"""SQL for verifications: plain functions of a Connection, run inside one transaction.

Every state change is one conditional UPDATE whose WHERE clause restates the
rule, so two processes racing on one verification cannot both win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, case, insert, literal, or_, select, update
from sqlalchemy.sql import ColumnElement

from relay.db.tables import attempts, verifications
from relay.phone import Destination
from relay.verifications.models import (
    CHECK_LIMIT,
    Attempt,
    AttemptStatus,
    Status,
    Verification,
)

V = verifications.c


@dataclass(frozen=True)
class Scope:
    """Whose data a request may touch: one account, one mode."""

    account_id: str
    livemode: bool

    def clause(self) -> ColumnElement[bool]:
        return and_(V.account_id == self.account_id, V.livemode == self.livemode)


@dataclass(frozen=True)
class NewVerification:
    id: str
    to: str
    country: str
    sender: str
    locale: str
    code_length: int
    code_mac: bytes
    sealed_code: bytes
    metadata: dict[str, str]
    webhook_url: str | None
    expires_at: datetime


@dataclass(frozen=True)
class ListQuery:
    limit: int
    starting_after: str | None = None
    ending_before: str | None = None
    status: Status | None = None
    to: str | None = None
    created_gte: datetime | None = None
    created_lt: datetime | None = None


def _attempt_from_row(row: Row[Any], livemode: bool) -> Attempt:
    return Attempt(
        id=row.id,
        status=AttemptStatus(row.status),
        carrier=row.carrier,
        at=row.at,
        error=row.error,
        livemode=livemode,
    )


def _from_row(row: Row[Any], attempt_rows: Sequence[Row[Any]] = ()) -> Verification:
    return Verification(
        id=row.id,
        account_id=row.account_id,
        livemode=row.livemode,
        to=row.to_number,
        country=row.country,
        sender=row.sender,
        locale=row.locale,
        code_length=row.code_length,
        status=Status(row.status),
        checks=row.checks,
        sends=row.sends,
        metadata=row.metadata,
        webhook_url=row.webhook_url,
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
        last_sent_at=row.last_sent_at,
        approved_at=row.approved_at,
        canceled_at=row.canceled_at,
        attempts=tuple(_attempt_from_row(a, row.livemode) for a in attempt_rows),
    )


_PUBLIC_COLUMNS = [c for c in verifications.c if c.name not in ("code_mac", "sealed_code")]


def _attempts_for(conn: Connection, ids: Sequence[str]) -> dict[str, list[Row[Any]]]:
    grouped: dict[str, list[Row[Any]]] = {i: [] for i in ids}
    if not ids:
        return grouped
    query = (
        select(attempts)
        .where(attempts.c.verification_id.in_(ids))
        .order_by(attempts.c.verification_id, attempts.c.id)
    )
    for row in conn.execute(query):
        grouped[row.verification_id].append(row)
    return grouped


def load(conn: Connection, scope: Scope, verification_id: str) -> Verification | None:
    row = conn.execute(
        select(*_PUBLIC_COLUMNS).where(scope.clause(), V.id == verification_id)
    ).first()
    if row is None:
        return None
    return _from_row(row, _attempts_for(conn, [row.id])[row.id])


def load_secrets(
    conn: Connection, scope: Scope, verification_id: str
) -> tuple[bytes, bytes | None] | None:
    row = conn.execute(
        select(V.code_mac, V.sealed_code).where(scope.clause(), V.id == verification_id)
    ).first()
    return None if row is None else (row.code_mac, row.sealed_code)


def destination_of(conn: Connection, scope: Scope, verification_id: str) -> Destination | None:
    row = conn.execute(
        select(V.to_number, V.country).where(scope.clause(), V.id == verification_id)
    ).first()
    return None if row is None else Destination(e164=row.to_number, country=row.country)


def pending_id_for(conn: Connection, scope: Scope, to: str) -> str | None:
    query = select(V.id).where(scope.clause(), V.to_number == to, V.status == Status.PENDING)
    if conn.dialect.name == "postgresql":
        # Serialise concurrent creates for one number behind the row lock.
        query = query.with_for_update()
    return conn.execute(query).scalar_one_or_none()


def insert_verification(
    conn: Connection, scope: Scope, new: NewVerification, now: datetime
) -> None:
    conn.execute(
        insert(verifications).values(
            id=new.id,
            account_id=scope.account_id,
            livemode=scope.livemode,
            to_number=new.to,
            country=new.country,
            sender=new.sender,
            locale=new.locale,
            code_length=new.code_length,
            code_mac=new.code_mac,
            sealed_code=new.sealed_code,
            status=Status.PENDING,
            checks=0,
            sends=1,
            metadata=new.metadata,
            webhook_url=new.webhook_url,
            created_at=now,
            updated_at=now,
            expires_at=new.expires_at,
            last_sent_at=now,
        )
    )


def count_resend(
    conn: Connection, scope: Scope, verification_id: str, *, seen_sends: int, now: datetime
) -> bool:
    """Record one more send; false if another request resent in between."""
    result = conn.execute(
        update(verifications)
        .where(
            scope.clause(),
            V.id == verification_id,
            V.status == Status.PENDING,
            V.sends == seen_sends,
            V.expires_at > now,
        )
        .values(sends=V.sends + 1, last_sent_at=now, updated_at=now)
    )
    return result.rowcount == 1


def insert_attempt(
    conn: Connection,
    *,
    attempt_id: str,
    verification_id: str,
    carrier: str,
    status: AttemptStatus,
    now: datetime,
    error: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        insert(attempts).values(
            id=attempt_id,
            verification_id=verification_id,
            carrier=carrier,
            status=status,
            error=error,
            at=now,
            updated_at=now,
        )
    )


def count_check(
    conn: Connection, scope: Scope, verification_id: str, *, correct: bool, now: datetime
) -> Status | None:
    """Count one check and move the state, atomically; None if it was not open."""
    next_checks = V.checks + 1
    closes = or_(_literal(correct), next_checks >= CHECK_LIMIT)
    new_status = case(
        (_literal(correct), Status.APPROVED.value),
        (next_checks >= CHECK_LIMIT, Status.MAX_ATTEMPTS_REACHED.value),
        else_=Status.PENDING.value,
    )
    result = conn.execute(
        update(verifications)
        .where(
            scope.clause(),
            V.id == verification_id,
            V.status == Status.PENDING,
            V.checks < CHECK_LIMIT,
            V.expires_at > now,
        )
        .values(
            checks=next_checks,
            status=new_status,
            updated_at=now,
            approved_at=case((_literal(correct), now), else_=V.approved_at),
            # A closed verification never sends again: drop the sealed code.
            sealed_code=case((closes, None), else_=V.sealed_code),
        )
        .returning(V.status)
    ).first()
    return None if result is None else Status(result.status)


def _literal(flag: bool) -> ColumnElement[bool]:
    return literal(flag)


def cancel(conn: Connection, scope: Scope, verification_id: str, *, now: datetime) -> bool:
    result = conn.execute(
        update(verifications)
        .where(
            scope.clause(),
            V.id == verification_id,
            V.status == Status.PENDING,
            V.expires_at > now,
        )
        .values(status=Status.CANCELED, canceled_at=now, updated_at=now, sealed_code=None)
    )
    return result.rowcount == 1


def expire_due(
    conn: Connection, *, now: datetime, limit: int, only: ColumnElement[bool] | None = None
) -> list[str]:
    """Mark pending verifications past their TTL expired; returns the ids it closed."""
    due = select(V.id).where(V.status == Status.PENDING, V.expires_at <= now)
    if only is not None:
        due = due.where(only)
    ids = list(conn.execute(due.order_by(V.expires_at).limit(limit)).scalars())
    if not ids:
        return []
    closed = conn.execute(
        update(verifications)
        .where(V.id.in_(ids), V.status == Status.PENDING, V.expires_at <= now)
        .values(status=Status.EXPIRED, updated_at=now, sealed_code=None)
        .returning(V.id)
    )
    return list(closed.scalars())


def expire_due_for_number(conn: Connection, scope: Scope, to: str, *, now: datetime) -> list[str]:
    return expire_due(conn, now=now, limit=10, only=and_(scope.clause(), V.to_number == to))


def expire_one(conn: Connection, scope: Scope, verification_id: str, *, now: datetime) -> bool:
    return bool(
        expire_due(conn, now=now, limit=1, only=and_(scope.clause(), V.id == verification_id))
    )


def list_page(
    conn: Connection, scope: Scope, query: ListQuery, *, now: datetime
) -> tuple[list[Verification], bool]:
    """Keyset pagination on the time-sortable id: page cost is independent of depth."""
    conditions: list[ColumnElement[bool]] = [scope.clause()]
    conditions += _filters(query, now)
    backwards = query.ending_before is not None
    if query.starting_after is not None:
        conditions.append(V.id < query.starting_after)
    if query.ending_before is not None:
        conditions.append(V.id > query.ending_before)
    order = V.id.asc() if backwards else V.id.desc()
    rows = list(
        conn.execute(
            select(*_PUBLIC_COLUMNS).where(*conditions).order_by(order).limit(query.limit + 1)
        )
    )
    has_more = len(rows) > query.limit
    rows = rows[: query.limit]
    if backwards:
        rows.reverse()
    grouped = _attempts_for(conn, [r.id for r in rows])
    return [_from_row(r, grouped[r.id]) for r in rows], has_more


def _filters(query: ListQuery, now: datetime) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if query.to is not None:
        conditions.append(V.to_number == query.to)
    if query.created_gte is not None:
        conditions.append(V.created_at >= query.created_gte)
    if query.created_lt is not None:
        conditions.append(V.created_at < query.created_lt)
    if query.status is Status.PENDING:
        conditions += [V.status == Status.PENDING, V.expires_at > now]
    elif query.status is Status.EXPIRED:
        conditions.append(
            or_(V.status == Status.EXPIRED, and_(V.status == Status.PENDING, V.expires_at <= now))
        )
    elif query.status is not None:
        conditions.append(V.status == query.status)
    return conditions


def load_any(conn: Connection, verification_id: str) -> Verification | None:
    """Load without an account scope: for background work only, never for requests."""
    row = conn.execute(select(*_PUBLIC_COLUMNS).where(V.id == verification_id)).first()
    if row is None:
        return None
    return _from_row(row, _attempts_for(conn, [row.id])[row.id])
