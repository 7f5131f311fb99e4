"""SQL for messages. State changes are conditional UPDATEs, like verifications'."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from relay.accounts.models import Scope
from relay.accounts.template_store import has_templates
from relay.db.sql import Row, Sql, Tx, document, flag, moment
from relay.delivery.joined import JOINED_ATTEMPT_COLUMNS, joined_attempts
from relay.delivery.owners import Sendable
from relay.messages.models import Message, MessageStatus
from relay.records import fast_init

# An enum made from its value is a Python call through EnumType; a dict is one lookup.
_STATUS_OF: dict[str, MessageStatus] = {member.value: member for member in MessageStatus}
# An enum's `.value` is a Python property: read per message written.
_TEXT_OF = {status: status.value for status in MessageStatus}

# Everything but the sealed code.
_PUBLIC_OF_M = ", ".join(
    f"m.{name}"
    for name in (
        "id",
        "account_id",
        "livemode",
        "to_number",
        "country",
        "sender",
        "locale",
        "status",
        "metadata",
        "webhook_url",
        "created_at",
        "updated_at",
        "expires_at",
    )
)
_INSERT = Sql(
    "INSERT INTO messages (id, account_id, livemode, to_number, country, sender, locale,"
    " status, sealed_code, metadata, webhook_url, created_at, updated_at, expires_at)"
    " VALUES (:id, :scope_account, :scope_livemode, :to, :country, :sender, :locale, :status,"
    " :sealed_code, :metadata, :webhook_url, :now, :now, :expires_at)"
)
# A message with its attempts, oldest first, in one round trip (an outer join).
_WITH_ATTEMPTS = (
    f"SELECT {_PUBLIC_OF_M}, {JOINED_ATTEMPT_COLUMNS} FROM messages m"
    " LEFT OUTER JOIN attempts a ON a.message_id = m.id WHERE {where} ORDER BY a.id"
)
_LOAD = Sql(
    _WITH_ATTEMPTS.format(
        where="m.id = :message_id AND m.account_id = :scope_account"
        " AND m.livemode = :scope_livemode"
    ),
    wide=True,
)
_LOAD_ANY = Sql(_WITH_ATTEMPTS.format(where="m.id = :message_id"), wide=True)
_MARK_SENT = Sql(
    "UPDATE messages SET status = 'sent', updated_at = :now"
    " WHERE id = :message_id AND status = 'queued'"
)
_FINISH = Sql(
    # The code is no longer needed once no attempt can follow.
    "UPDATE messages SET status = :to_status, updated_at = :now, sealed_code = NULL"
    " WHERE id = :message_id AND status IN ('queued', 'sent')"
)


@fast_init
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


async def insert_message(
    tx: Tx, scope: Scope, new: NewMessage, now: datetime, *, status: MessageStatus
) -> None:
    """Write a new message in `status`, the state its send left it in (`as_written`
    shows it before that send)."""
    final = status in (MessageStatus.DELIVERED, MessageStatus.FAILED)
    await tx.execute(
        _INSERT,
        {
            **scope.params(),
            "id": new.id,
            "to": new.to,
            "country": new.country,
            "sender": new.sender,
            "locale": new.locale,
            "status": _TEXT_OF[status],
            # The code is no longer needed once no attempt can follow.
            "sealed_code": None if final else new.sealed_code,
            "metadata": new.metadata,
            "webhook_url": new.webhook_url,
            "now": now,
            "expires_at": new.expires_at,
        },
    )


def as_written(scope: Scope, new: NewMessage, now: datetime) -> Message:
    """A new message, queued, before its send."""
    return Message(
        id=new.id,
        account_id=scope.account_id,
        livemode=scope.livemode,
        to=new.to,
        country=new.country,
        sender=new.sender,
        locale=new.locale,
        status=MessageStatus.QUEUED,
        metadata=new.metadata,
        webhook_url=new.webhook_url,
        created_at=now,
        updated_at=now,
        expires_at=new.expires_at,
    )


def _joined(rows: list[Row]) -> Message | None:
    if not rows:
        return None
    row = rows[0]
    livemode = flag(row["livemode"])
    return Message(
        id=row["id"],
        account_id=row["account_id"],
        livemode=livemode,
        to=row["to_number"],
        country=row["country"],
        sender=row["sender"],
        locale=row["locale"],
        status=_STATUS_OF[row["status"]],
        metadata=document(row["metadata"]),
        webhook_url=row["webhook_url"],
        created_at=moment(row["created_at"]),
        updated_at=moment(row["updated_at"]),
        expires_at=moment(row["expires_at"]),
        attempts=tuple(joined_attempts(rows, livemode=livemode)),
    )


async def load(tx: Tx, scope: Scope, message_id: str) -> Message | None:
    return _joined(await tx.fetch(_LOAD, {**scope.params(), "message_id": message_id}))


async def load_any(tx: Tx, message_id: str) -> Message | None:
    """Without an account scope: for the delivery layer only, never for requests."""
    return _joined(await tx.fetch(_LOAD_ANY, {"message_id": message_id}))


async def mark_sent(tx: Tx, message_id: str, *, now: datetime) -> None:
    await tx.execute(_MARK_SENT, {"message_id": message_id, "now": now})


async def finish(tx: Tx, message_id: str, status: MessageStatus, *, now: datetime) -> None:
    await tx.execute(_FINISH, {"message_id": message_id, "to_status": _TEXT_OF[status], "now": now})


_SENDABLE = Sql(
    "SELECT m.account_id, m.to_number, m.sender, m.locale, m.sealed_code, m.expires_at, a.brand,"
    f" a.webotp_domain, {has_templates('a')}"
    " FROM messages m JOIN accounts a ON a.id = m.account_id"
    " WHERE m.id = :message_id"
)


async def sendable(tx: Tx, message_id: str) -> Sendable | None:
    """Without an account scope: for the delivery layer only."""
    row = await tx.fetchrow(_SENDABLE, {"message_id": message_id})
    return None if row is None else Sendable.from_row(message_id, row)
