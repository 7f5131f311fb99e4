"""SQL for idempotency keys. Claims are an INSERT that may lose to the unique
constraint; every later write is conditional on the holder's lease."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import ColumnElement

from relay.accounts.models import Scope
from relay.db.tables import idempotency_keys
from relay.idempotency.models import KeyRecord, KeyStatus, StoredResponse

I = idempotency_keys.c  # noqa: E741 - the table's column namespace, as V is for verifications


def _where(scope: Scope, key: str) -> ColumnElement[bool]:
    return (I.account_id == scope.account_id) & (I.livemode == scope.livemode) & (I.key == key)


def try_insert(
    conn: Connection,
    scope: Scope,
    key: str,
    *,
    request_hash: str,
    locked_until: datetime,
    now: datetime,
) -> bool:
    """Claim a fresh key; False if the key exists (whoever holds it)."""
    values: dict[str, Any] = {
        "account_id": scope.account_id,
        "livemode": scope.livemode,
        "key": key,
        "request_hash": request_hash,
        "status": KeyStatus.IN_PROGRESS.value,
        "locked_until": locked_until,
        "created_at": now,
    }
    insert = (
        postgresql.insert(idempotency_keys)
        if conn.dialect.name == "postgresql"
        else sqlite.insert(idempotency_keys)
    )
    statement = insert.values(**values).on_conflict_do_nothing().returning(I.id)
    return conn.execute(statement).first() is not None


def _record(row: Row[Any]) -> KeyRecord:
    response = None
    if row.response_status is not None:
        headers = tuple((str(name), str(value)) for name, value in row.response_headers)
        response = StoredResponse(row.response_status, headers, row.response_body)
    return KeyRecord(
        request_hash=row.request_hash,
        status=KeyStatus(row.status),
        locked_until=row.locked_until,
        created_at=row.created_at,
        response=response,
    )


def load(conn: Connection, scope: Scope, key: str) -> KeyRecord | None:
    query = select(idempotency_keys).where(_where(scope, key))
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).first()
    return None if row is None else _record(row)


def take_over(
    conn: Connection,
    scope: Scope,
    key: str,
    *,
    seen: KeyRecord,
    request_hash: str,
    locked_until: datetime,
    now: datetime,
) -> bool:
    """Take a lapsed lease or a stale key; the WHERE restates what was seen, so of two
    processes taking over at once only one matches."""
    result = conn.execute(
        update(idempotency_keys)
        .where(
            _where(scope, key),
            I.status == seen.status.value,
            I.locked_until == seen.locked_until,
            I.created_at == seen.created_at,
        )
        .values(
            request_hash=request_hash,
            status=KeyStatus.IN_PROGRESS.value,
            response_status=None,
            response_headers=None,
            response_body=None,
            locked_until=locked_until,
            created_at=now,
        )
    )
    return result.rowcount == 1


def _held(scope: Scope, key: str, locked_until: datetime) -> ColumnElement[bool]:
    return (
        _where(scope, key)
        & (I.status == KeyStatus.IN_PROGRESS.value)
        & (I.locked_until == locked_until)
    )


def complete(
    conn: Connection, scope: Scope, key: str, *, locked_until: datetime, response: StoredResponse
) -> bool:
    result = conn.execute(
        update(idempotency_keys)
        .where(_held(scope, key, locked_until))
        .values(
            status=KeyStatus.DONE.value,
            response_status=response.status,
            response_headers=[list(pair) for pair in response.headers],
            response_body=response.body,
        )
    )
    return result.rowcount == 1


def release(conn: Connection, scope: Scope, key: str, *, locked_until: datetime) -> None:
    conn.execute(delete(idempotency_keys).where(_held(scope, key, locked_until)))


def prune(conn: Connection, *, before: datetime) -> int:
    return conn.execute(delete(idempotency_keys).where(I.created_at <= before)).rowcount
