"""SQL for messages. State changes are conditional UPDATEs, like verifications'."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, insert, null, select, update

from relay.accounts.models import Scope
from relay.db.prepared import Prepared
from relay.db.tables import UtcDateTime, accounts, attempts, messages
from relay.delivery.joined import JOINED_ATTEMPT_COLUMNS, joined_attempts
from relay.messages.models import Message, MessageStatus

M = messages.c
_NOW = bindparam("now", type_=UtcDateTime())

_PUBLIC_COLUMNS = [c for c in messages.c if c.name != "sealed_code"]
_INSERT = Prepared(insert(messages))
# A message with its attempts, oldest first, in one round trip (an outer join).
_WITH_ATTEMPTS = (
    select(*_PUBLIC_COLUMNS, *JOINED_ATTEMPT_COLUMNS)
    .select_from(messages.outerjoin(attempts, attempts.c.message_id == M.id))
    .order_by(attempts.c.id)
)
_LOAD = Prepared(
    _WITH_ATTEMPTS.where(
        M.id == bindparam("message_id"),
        M.account_id == bindparam("scope_account"),
        M.livemode == bindparam("scope_livemode"),
    )
)
_LOAD_ANY = Prepared(_WITH_ATTEMPTS.where(M.id == bindparam("message_id")))
# (_FINISH below stays on conn.execute: its IN list is an expanding parameter.)
_MARK_SENT = Prepared(
    update(messages)
    .where(M.id == bindparam("message_id"), M.status == MessageStatus.QUEUED.value)
    .values(status=MessageStatus.SENT.value, updated_at=_NOW)
)
_FINISH = (
    update(messages)
    .where(
        M.id == bindparam("message_id"),
        M.status.in_([MessageStatus.QUEUED.value, MessageStatus.SENT.value]),
    )
    # The code is no longer needed once no attempt can follow.
    .values(status=bindparam("to_status"), updated_at=_NOW, sealed_code=null())
)


@dataclass(frozen=True)
class NewMessage:
    id: str
    to: str
    country: str
    sender: str
    locale: str
    sealed_code: bytes
    metadata: dict[str, str]
    webhook_url: str | None
    expires_at: datetime


def insert_message(conn: Connection, scope: Scope, new: NewMessage, now: datetime) -> None:
    _INSERT.execute(
        conn,
        {
            "id": new.id,
            "account_id": scope.account_id,
            "livemode": scope.livemode,
            "to_number": new.to,
            "country": new.country,
            "sender": new.sender,
            "locale": new.locale,
            "status": MessageStatus.QUEUED.value,
            "sealed_code": new.sealed_code,
            "metadata": new.metadata,
            "webhook_url": new.webhook_url,
            "created_at": now,
            "updated_at": now,
            "expires_at": new.expires_at,
        },
    )


def _joined(rows: list[Any]) -> Message | None:
    if not rows:
        return None
    row = rows[0]
    return Message(
        id=row.id,
        account_id=row.account_id,
        livemode=row.livemode,
        to=row.to_number,
        country=row.country,
        sender=row.sender,
        locale=row.locale,
        status=MessageStatus(row.status),
        metadata=row.metadata,
        webhook_url=row.webhook_url,
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
        attempts=tuple(joined_attempts(rows, livemode=row.livemode)),
    )


def load(conn: Connection, scope: Scope, message_id: str) -> Message | None:
    return _joined(_LOAD.execute(conn, {**scope.params(), "message_id": message_id}).all())


def load_any(conn: Connection, message_id: str) -> Message | None:
    """Without an account scope: for the delivery layer only, never for requests."""
    return _joined(_LOAD_ANY.execute(conn, {"message_id": message_id}).all())


def mark_sent(conn: Connection, message_id: str, *, now: datetime) -> None:
    _MARK_SENT.execute(conn, {"message_id": message_id, "now": now})


def finish(conn: Connection, message_id: str, status: MessageStatus, *, now: datetime) -> None:
    conn.execute(_FINISH, {"message_id": message_id, "to_status": status.value, "now": now})


@dataclass(frozen=True)
class Sendable:
    """What rebuilding a message's SMS needs; `sealed_code` (the client's code) is None once
    the message is finished."""

    to: str
    sender: str
    locale: str
    sealed_code: bytes | None
    expires_at: datetime
    brand: str
    webotp_domain: str | None


_SENDABLE = Prepared(
    select(
        M.to_number,
        M.sender,
        M.locale,
        M.sealed_code,
        M.expires_at,
        accounts.c.brand,
        accounts.c.webotp_domain,
    )
    .join(accounts, accounts.c.id == M.account_id)
    .where(M.id == bindparam("message_id"))
)


def sendable(conn: Connection, message_id: str) -> Sendable | None:
    """Without an account scope: for the delivery layer only."""
    row = _SENDABLE.execute(conn, {"message_id": message_id}).first()
    return None if row is None else Sendable(*row)
