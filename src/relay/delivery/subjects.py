"""What an attempt is for: its verification or its message, seen from the delivery layer."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, bindparam, select

from relay.db.prepared import Prepared
from relay.db.tables import accounts, messages, verifications
from relay.delivery.store import AttemptRow
from relay.messages import store as message_store
from relay.messages.models import MessageStatus
from relay.verifications import store as verification_store
from relay.verifications.models import Status

Kind = Literal["verification", "message"]

# Connection flag: the subject as last loaded in this transaction, so the
# request that dispatched can answer with it instead of reading it again.
LATEST = "relay.delivery.latest"


@dataclass(frozen=True)
class Subject:
    """The owner of an attempt as events show it, at one moment."""

    kind: Kind
    id: str
    account_id: str
    livemode: bool
    country: str
    expires_at: datetime
    webhook_url: str | None
    is_open: bool  # may it still be sent (pending verification, unfinished message)?
    payload: dict[str, Any]


def load(conn: Connection, attempt: AttemptRow, *, now: datetime) -> Subject | None:
    if attempt.verification_id is not None:
        verification = verification_store.load_any(conn, attempt.verification_id)
        if verification is None:
            return None
        conn.info[LATEST] = verification
        return Subject(
            kind="verification",
            id=verification.id,
            account_id=verification.account_id,
            livemode=verification.livemode,
            country=verification.country,
            expires_at=verification.expires_at,
            webhook_url=verification.webhook_url,
            is_open=verification.status_at(now) is Status.PENDING,
            payload=verification.to_api(now),
        )
    message = message_store.load_any(conn, attempt.subject_id)
    if message is None:
        return None
    conn.info[LATEST] = message
    return Subject(
        kind="message",
        id=message.id,
        account_id=message.account_id,
        livemode=message.livemode,
        country=message.country,
        expires_at=message.expires_at,
        webhook_url=message.webhook_url,
        is_open=message.status in (MessageStatus.QUEUED, MessageStatus.SENT),
        payload=message.to_api(),
    )


def just_sent(subject: Subject, attempt_id: str) -> Subject:
    """The subject as it stood when `attempt_id` was sent, before its receipt was applied."""
    payload = dict(subject.payload)
    payload["attempts"] = [
        {**attempt, "status": "sent"} if attempt["id"] == attempt_id else attempt
        for attempt in payload["attempts"]
    ]
    if subject.kind == "message":
        payload["status"] = MessageStatus.SENT.value
    return dataclasses.replace(subject, payload=payload)


@dataclass(frozen=True)
class Sendable:
    """What rebuilding an attempt's SMS needs; `sealed_code` is None once closed."""

    owner_id: str
    to: str
    sender: str
    locale: str
    sealed_code: bytes | None
    expires_at: datetime
    brand: str
    webotp_domain: str | None


V = verifications.c
M = messages.c
AC = accounts.c
_VERIFICATION_SENDABLE = Prepared(
    select(
        V.id,
        V.to_number,
        V.sender,
        V.locale,
        V.sealed_code,
        V.expires_at,
        AC.brand,
        AC.webotp_domain,
    )
    .join(accounts, AC.id == V.account_id)
    .where(V.id == bindparam("owner_id"), V.status == Status.PENDING.value)
)
_MESSAGE_SENDABLE = Prepared(
    select(
        M.id,
        M.to_number,
        M.sender,
        M.locale,
        M.sealed_code,
        M.expires_at,
        AC.brand,
        AC.webotp_domain,
    )
    .join(accounts, AC.id == M.account_id)
    .where(M.id == bindparam("owner_id"))
)


def sendable(conn: Connection, attempt: AttemptRow) -> Sendable | None:
    query = _VERIFICATION_SENDABLE if attempt.verification_id else _MESSAGE_SENDABLE
    row = query.execute(conn, {"owner_id": attempt.subject_id}).first()
    if row is None:
        return None
    return Sendable(*row)
