"""One verification's or message's story, for the console's look-up: never the code.

Found by id, or by the stored number or mailbox (the newest first): every spelling
of an email address finds the verifications of its mailbox. Numbers are shown with
all but their last four digits masked; an email address as it was given, with its
first letter and its domain, an IDNA domain in its `xn--` form beside.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relay.console.scope import View, scoped
from relay.db.sql import Row, Sql, Tx, document, flag, moment, moment_or_none
from relay.email_address import ascii_domain

_VERIFICATION_COLUMNS = (
    "id, account_id, livemode, to_number, country, status, checks, sends, created_at,"
    " expires_at, approved_at, canceled_at, address"
)
_MESSAGE_COLUMNS = (
    "id, account_id, livemode, to_number, country, status, 0 AS checks, 1 AS sends,"
    " created_at, expires_at, NULL AS approved_at, NULL AS canceled_at, NULL AS address"
)
_VERIFICATION = Sql(
    f"SELECT {_VERIFICATION_COLUMNS} FROM verifications v"
    f" WHERE v.id = :id AND {scoped('v.account_id', 'v.livemode')}"
)
_MESSAGE = Sql(
    f"SELECT {_MESSAGE_COLUMNS} FROM messages m"
    f" WHERE m.id = :id AND {scoped('m.account_id', 'm.livemode')}"
)
_BY_NUMBER = Sql(
    f"SELECT {_VERIFICATION_COLUMNS} FROM verifications v"
    f" WHERE v.to_number = :number AND {scoped('v.account_id', 'v.livemode')}"
    " ORDER BY v.id DESC LIMIT :limit"
)
_MESSAGES_BY_NUMBER = Sql(
    f"SELECT {_MESSAGE_COLUMNS} FROM messages m"
    f" WHERE m.to_number = :number AND {scoped('m.account_id', 'm.livemode')}"
    " ORDER BY m.id DESC LIMIT :limit"
)
_ATTEMPTS = Sql(
    "SELECT id, carrier, status, error, carrier_message_id, position, at, updated_at"
    " FROM attempts WHERE verification_id = :id OR message_id = :id ORDER BY at, id"
)
_EVENTS = Sql(
    "SELECT id, type, created_at, webhook_url, delivery_status FROM events"
    " WHERE related_id = :id AND account_id = :account ORDER BY id"
)
_DELIVERIES = Sql(
    "SELECT w.event_id AS event_id, w.number AS number, w.at AS at,"
    " w.status_code AS status_code, w.error AS error, w.duration_ms AS duration_ms,"
    " w.response_excerpt AS response_excerpt"
    " FROM webhook_attempts w JOIN events e ON e.id = w.event_id"
    " WHERE e.related_id = :id AND e.account_id = :account ORDER BY w.event_id, w.number"
)


def masked(number: str) -> str:
    """+33612345678 -> +•••••••5678: enough to tell two numbers apart, not to dial one.
    An email address keeps its first letter and its domain: a•••@example.com. An IDNA
    domain is shown in its `xn--` form beside, a•••@bücher.example
    (xn--bcher-kva.example): a homograph of a familiar domain (a Cyrillic a in
    example.com reads the same) is told apart by it."""
    if "@" in number:
        local, domain = number.rsplit("@", 1)
        shown = local[:1] + "•" * max(len(local) - 1, 3) + "@" + domain
        encoded = ascii_domain(domain)
        return shown if encoded == domain else f"{shown} ({encoded})"
    if len(number) <= 4:
        return "•" * len(number)
    head = "+" if number.startswith("+") else ""
    return head + "•" * (len(number) - len(head) - 4) + number[-4:]


@dataclass(frozen=True)
class Subject:
    """A verification or a message, as the look-up lists it."""

    id: str
    account_id: str
    livemode: bool
    number: str  # masked
    country: str
    status: str
    checks: int
    sends: int
    created_at: datetime
    expires_at: datetime
    approved_at: datetime | None
    canceled_at: datetime | None

    @property
    def kind(self) -> str:
        return "verification" if self.id.startswith("ver_") else "message"


@dataclass(frozen=True)
class SmsAttempt:
    id: str
    carrier: str
    status: str
    error: Any
    carrier_message_id: str | None
    position: int
    at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Delivery:
    number: int
    at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int | None
    response_excerpt: str | None = None


@dataclass(frozen=True)
class Event:
    id: str
    type: str
    created_at: datetime
    webhook_url: str | None
    delivery_status: str
    deliveries: tuple[Delivery, ...]


@dataclass(frozen=True)
class Timeline:
    subject: Subject
    attempts: list[SmsAttempt]
    events: list[Event]


def _subject(row: Row) -> Subject:
    return Subject(
        id=row["id"],
        account_id=row["account_id"],
        livemode=flag(row["livemode"]),
        # An email as given: `to_number` holds its mailbox.
        number=masked(row["address"] or row["to_number"]),
        country=row["country"],
        status=row["status"],
        checks=int(row["checks"]),
        sends=int(row["sends"]),
        created_at=moment(row["created_at"]),
        expires_at=moment(row["expires_at"]),
        approved_at=moment_or_none(row["approved_at"]),
        canceled_at=moment_or_none(row["canceled_at"]),
    )


async def find_by_number(tx: Tx, view: View, number: str, *, limit: int = 20) -> list[Subject]:
    params = {**view.params(), "number": number, "limit": limit}
    rows = [*await tx.fetch(_BY_NUMBER, params), *await tx.fetch(_MESSAGES_BY_NUMBER, params)]
    found = [_subject(row) for row in rows]
    return sorted(found, key=lambda s: s.id, reverse=True)[:limit]


async def timeline(tx: Tx, view: View, subject_id: str) -> Timeline | None:
    statement = _VERIFICATION if subject_id.startswith("ver_") else _MESSAGE
    row = await tx.fetchrow(statement, {**view.params(), "id": subject_id})
    if row is None:
        return None
    subject = _subject(row)
    attempts = [
        SmsAttempt(
            id=r["id"],
            carrier=r["carrier"],
            status=r["status"],
            error=document(r["error"]),
            carrier_message_id=r["carrier_message_id"],
            position=int(r["position"]),
            at=moment(r["at"]),
            updated_at=moment(r["updated_at"]),
        )
        for r in await tx.fetch(_ATTEMPTS, {"id": subject_id})
    ]
    owner = {"id": subject_id, "account": subject.account_id}
    deliveries: dict[str, list[Delivery]] = {}
    for r in await tx.fetch(_DELIVERIES, owner):
        deliveries.setdefault(r["event_id"], []).append(
            Delivery(
                int(r["number"]),
                moment(r["at"]),
                r["status_code"],
                r["error"],
                r["duration_ms"],
                r["response_excerpt"],
            )
        )
    events = [
        Event(
            id=r["id"],
            type=r["type"],
            created_at=moment(r["created_at"]),
            webhook_url=r["webhook_url"],
            delivery_status=r["delivery_status"],
            deliveries=tuple(deliveries.get(r["id"], ())),
        )
        for r in await tx.fetch(_EVENTS, owner)
    ]
    return Timeline(subject, attempts, events)


_RELATED = Sql(
    f"SELECT related_id FROM events e WHERE e.id = :id AND {scoped('e.account_id', 'e.livemode')}"
)


async def related_of(tx: Tx, view: View, event_id: str) -> str | None:
    """The verification or message an event is about."""
    row = await tx.fetchrow(_RELATED, {**view.params(), "id": event_id})
    return None if row is None else str(row["related_id"])
