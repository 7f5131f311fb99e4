"""SQL for verifications: plain functions of a Connection, run inside one transaction.

Every state change is one conditional UPDATE whose WHERE clause restates the
rule, so two processes racing on one verification cannot both win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Connection,
    Row,
    and_,
    bindparam,
    case,
    insert,
    null,
    or_,
    select,
    update,
)
from sqlalchemy.sql import ColumnElement

# `Scope as Scope`: still imported from here by web/idempotency.py, until the HTTP rewrite.
from relay.accounts.models import Scope as Scope
from relay.db.prepared import Prepared
from relay.db.tables import UtcDateTime, accounts, attempts, in_state, verifications
from relay.delivery.joined import JOINED_ATTEMPT_COLUMNS, attempts_of, joined_attempts
from relay.phone import Destination
from relay.verifications.models import CHECK_LIMIT, Attempt, Status, Verification

V = verifications.c


# Hot statements are built once with bind parameters: building SQLAlchemy
# expressions per call cost more than the SQL itself (see docs/decisions.md).
# Bind names avoid column names, which UPDATE reserves for its SET clause.
_NOW = bindparam("now", type_=UtcDateTime())
_IN_SCOPE = (V.account_id == bindparam("scope_account"), V.livemode == bindparam("scope_livemode"))
_THIS = (*_IN_SCOPE, V.id == bindparam("verification_id"))
_OPEN = (*_THIS, V.status == Status.PENDING.value, V.expires_at > _NOW)


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


def _from_row(row: Row[Any], found: Sequence[Attempt] = ()) -> Verification:
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
        attempts=tuple(found),
    )


_PUBLIC_COLUMNS = [c for c in verifications.c if c.name not in ("code_mac", "sealed_code")]
# A verification with its attempts, oldest first, in one round trip: one row
# per attempt (an outer join, so one row with NULL attempt columns if none).
_WITH_ATTEMPTS = (
    select(*_PUBLIC_COLUMNS, *JOINED_ATTEMPT_COLUMNS)
    .select_from(verifications.outerjoin(attempts, attempts.c.verification_id == V.id))
    .order_by(attempts.c.id)
)
_LOAD = Prepared(_WITH_ATTEMPTS.where(*_THIS))
# Without a scope: the delivery layer's load, once per event it records.
_LOAD_ANY = Prepared(_WITH_ATTEMPTS.where(V.id == bindparam("verification_id")))
_LOAD_SECRETS = select(V.code_mac, V.sealed_code).where(*_THIS)
_CHECK_MATERIAL = Prepared(
    select(V.code_mac, V.to_number, V.country, V.status, V.checks, V.expires_at).where(*_THIS)
)
_PENDING_ID = select(V.id).where(
    *_IN_SCOPE, V.to_number == bindparam("to"), V.status == Status.PENDING.value
)
# On PostgreSQL, concurrent creates for one number queue behind the row lock.
_PENDING_ID_LOCKED = _PENDING_ID.with_for_update()
_PENDING_SQL = select(V.id, V.expires_at).where(
    *_IN_SCOPE, V.to_number == bindparam("to"), V.status == Status.PENDING.value
)
_PENDING = Prepared(_PENDING_SQL)
_PENDING_LOCKED = Prepared(_PENDING_SQL.with_for_update())
_INSERT_VERIFICATION = Prepared(insert(verifications))
_COUNT_RESEND = Prepared(
    update(verifications)
    .where(*_OPEN, V.sends == bindparam("seen_sends"))
    .values(sends=V.sends + 1, last_sent_at=_NOW, updated_at=_NOW)
)
# `models.count_check`, the check rule, as one statement: the WHERE clause is
# when a check counts, the CASEs what it does. tests/db/test_check_rule.py walks
# the rule's inputs and shows the two agree.
_CORRECT = bindparam("correct", type_=Boolean())
_NEXT_CHECKS = V.checks + 1
_COUNT_CHECK = Prepared(
    update(verifications)
    .where(*_OPEN, V.checks < CHECK_LIMIT)
    .values(
        checks=_NEXT_CHECKS,
        status=case(
            (_CORRECT, Status.APPROVED.value),
            (_NEXT_CHECKS >= CHECK_LIMIT, Status.MAX_ATTEMPTS_REACHED.value),
            else_=Status.PENDING.value,
        ),
        updated_at=_NOW,
        approved_at=case((_CORRECT, _NOW), else_=V.approved_at),
        # A closed verification never sends again: drop the sealed code.
        sealed_code=case((or_(_CORRECT, _NEXT_CHECKS >= CHECK_LIMIT), null()), else_=V.sealed_code),
    )
    .returning(V.status)
)
_CANCEL = (
    update(verifications)
    .where(*_OPEN)
    .values(status=Status.CANCELED.value, canceled_at=_NOW, updated_at=_NOW, sealed_code=null())
)
_EXPIRED_VALUES = {"status": Status.EXPIRED.value, "updated_at": _NOW, "sealed_code": null()}
_PAST_TTL = (V.status == Status.PENDING.value, V.expires_at <= _NOW)
_EXPIRE_ONE = update(verifications).where(*_THIS, *_PAST_TTL).values(**_EXPIRED_VALUES)


def _this(scope: Scope, verification_id: str, **extra: Any) -> dict[str, Any]:
    return {**scope.params(), "verification_id": verification_id, **extra}


def load(conn: Connection, scope: Scope, verification_id: str) -> Verification | None:
    return _joined(_LOAD.execute(conn, _this(scope, verification_id)).all())


def _joined(rows: list[Any]) -> Verification | None:
    if not rows:
        return None
    first = rows[0]
    return _from_row(first, joined_attempts(rows, livemode=first.livemode))


def load_secrets(
    conn: Connection, scope: Scope, verification_id: str
) -> tuple[bytes, bytes | None] | None:
    row = conn.execute(_LOAD_SECRETS, _this(scope, verification_id)).first()
    return None if row is None else (row.code_mac, row.sealed_code)


@dataclass(frozen=True)
class CheckMaterial:
    """What a check needs, in one read: the code's MAC, where it went, the rule's inputs."""

    code_mac: bytes
    destination: Destination
    status: Status
    checks: int
    expires_at: datetime


def check_material(conn: Connection, scope: Scope, verification_id: str) -> CheckMaterial | None:
    row = _CHECK_MATERIAL.execute(conn, _this(scope, verification_id)).first()
    if row is None:
        return None
    destination = Destination(e164=row.to_number, country=row.country)
    return CheckMaterial(row.code_mac, destination, Status(row.status), row.checks, row.expires_at)


def pending_id_for(conn: Connection, scope: Scope, to: str) -> str | None:
    query = _PENDING_ID_LOCKED if conn.dialect.name == "postgresql" else _PENDING_ID
    found: str | None = conn.execute(query, {**scope.params(), "to": to}).scalar_one_or_none()
    return found


def pending_for(conn: Connection, scope: Scope, to: str) -> tuple[str, datetime] | None:
    """The number's pending verification and its expiry, locked on PostgreSQL (at most one)."""
    query = _PENDING_LOCKED if conn.dialect.name == "postgresql" else _PENDING
    row = query.execute(conn, {**scope.params(), "to": to}).first()
    return None if row is None else (row.id, row.expires_at)


def insert_verification(
    conn: Connection, scope: Scope, new: NewVerification, now: datetime
) -> None:
    _INSERT_VERIFICATION.execute(
        conn,
        {
            "id": new.id,
            "account_id": scope.account_id,
            "livemode": scope.livemode,
            "to_number": new.to,
            "country": new.country,
            "sender": new.sender,
            "locale": new.locale,
            "code_length": new.code_length,
            "code_mac": new.code_mac,
            "sealed_code": new.sealed_code,
            "status": Status.PENDING.value,
            "checks": 0,
            "sends": 1,
            "metadata": new.metadata,
            "webhook_url": new.webhook_url,
            "created_at": now,
            "updated_at": now,
            "expires_at": new.expires_at,
            "last_sent_at": now,
        },
    )


def count_resend(
    conn: Connection, scope: Scope, verification_id: str, *, seen_sends: int, now: datetime
) -> bool:
    """Record one more send; false if another request resent in between."""
    params = _this(scope, verification_id, seen_sends=seen_sends, now=now)
    return _COUNT_RESEND.execute(conn, params).rowcount == 1


def count_check(
    conn: Connection, scope: Scope, verification_id: str, *, correct: bool, now: datetime
) -> Status | None:
    """Count one check and move the state, atomically; None if it was not open."""
    params = _this(scope, verification_id, correct=correct, now=now)
    result = _COUNT_CHECK.execute(conn, params).first()
    return None if result is None else Status(result.status)


def cancel(conn: Connection, scope: Scope, verification_id: str, *, now: datetime) -> bool:
    return conn.execute(_CANCEL, _this(scope, verification_id, now=now)).rowcount == 1


def expire_due(
    conn: Connection, *, now: datetime, limit: int, only: ColumnElement[bool] | None = None
) -> list[str]:
    """Mark pending verifications past their TTL expired; returns the ids it closed."""
    due = select(V.id).where(in_state(V.status, Status.PENDING), V.expires_at <= now)
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


_ANY_DUE = Prepared(
    select(V.id).where(in_state(V.status, Status.PENDING), V.expires_at <= _NOW).limit(1)
)


def any_due(conn: Connection, *, now: datetime) -> bool:
    return _ANY_DUE.execute(conn, {"now": now}).first() is not None


def expire_one(conn: Connection, scope: Scope, verification_id: str, *, now: datetime) -> bool:
    return conn.execute(_EXPIRE_ONE, _this(scope, verification_id, now=now)).rowcount == 1


def list_page(
    conn: Connection, scope: Scope, query: ListQuery, *, now: datetime
) -> tuple[list[Verification], bool]:
    """Keyset pagination on the time-sortable id: page cost is independent of depth."""
    conditions: list[ColumnElement[bool]] = [
        V.account_id == scope.account_id,
        V.livemode == scope.livemode,
    ]
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
    grouped = attempts_of(conn, [r.id for r in rows], livemode=scope.livemode)
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
    return _joined(_LOAD_ANY.execute(conn, {"verification_id": verification_id}).all())


@dataclass(frozen=True)
class Sendable:
    """What rebuilding a pending verification's SMS needs. `sealed_code` holds the code."""

    to: str
    sender: str
    locale: str
    sealed_code: bytes | None
    expires_at: datetime
    brand: str
    webotp_domain: str | None


_SENDABLE = Prepared(
    select(
        V.to_number,
        V.sender,
        V.locale,
        V.sealed_code,
        V.expires_at,
        accounts.c.brand,
        accounts.c.webotp_domain,
    )
    .join(accounts, accounts.c.id == V.account_id)
    .where(V.id == bindparam("verification_id"), V.status == Status.PENDING.value)
)


def sendable(conn: Connection, verification_id: str) -> Sendable | None:
    """Without an account scope, for the delivery layer: None unless it is pending."""
    row = _SENDABLE.execute(conn, {"verification_id": verification_id}).first()
    return None if row is None else Sendable(*row)
