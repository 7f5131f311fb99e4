"""The outbox: an event row is written in the transaction of the change it reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import orjson

from relay.clock import isoformat
from relay.db.sql import Row, Sql, Tx, moment
from relay.events.models import DeliveryStatus, EventType, NewEvent, Shown, payload_json
from relay.ids import new_id
from relay.webhooks.guard import endpoint

# An enum made from its value is a Python call through EnumType; a dict is one lookup.
_TYPE_OF: dict[str, EventType] = {member.value: member for member in EventType}
_DELIVERY_STATUS_OF: dict[str, DeliveryStatus] = {member.value: member for member in DeliveryStatus}
# An enum's `.value` is a Python property: read per event.
_TYPE_TEXT = {kind: kind.value for kind in EventType}
_DELIVERY_TEXT = {status: status.value for status in DeliveryStatus}
_PENDING_TEXT = DeliveryStatus.PENDING.value
_NONE_TEXT = DeliveryStatus.NONE.value

# Notified when an event with a webhook commits: the delivery loop listens.
CHANNEL = "events"

_INSERT_EVENT = Sql(
    "INSERT INTO events (id, account_id, livemode, type, related_id, payload, webhook_url,"
    " endpoint, delivery_status, created_at, next_attempt_at) VALUES (:id, :account_id,"
    " :livemode, :type, :related_id, :payload, :webhook_url, :endpoint, :delivery_status,"
    " :created_at, :next_attempt_at)"
)


class Subject(Protocol):
    """What an event is about (a verification, a message), as far as the outbox cares."""

    @property
    def id(self) -> str: ...

    @property
    def account_id(self) -> str: ...

    @property
    def livemode(self) -> bool: ...

    @property
    def webhook_url(self) -> str | None: ...


async def record_about(
    tx: Tx, subject: Subject, kind: EventType, *, now: datetime, data_object: Shown
) -> None:
    """A new event of `kind` about `subject`, showing it as `data_object`."""
    await record_all_about(tx, subject, [(kind, data_object)], now=now)


async def record_all_about(
    tx: Tx,
    subject: Subject,
    changes: Sequence[tuple[EventType, Shown]],
    *,
    now: datetime,
) -> None:
    """Events about `subject`, in order, each showing it as its own `data_object`: one
    statement for all of them."""
    if not changes:
        return
    webhook_url = subject.webhook_url
    account_id, livemode, related_id = subject.account_id, subject.livemode, subject.id
    # The delivery loop's per-endpoint cap reads `endpoint` (`relay.events.due`).
    if webhook_url:
        status, receiver, due = _PENDING_TEXT, endpoint(webhook_url), now
    else:
        status, receiver, due = _NONE_TEXT, None, None
    rows: list[dict[str, Any]] = []
    for kind, data in changes:
        event_id = new_id("evt")
        rows.append(
            {
                "id": event_id,
                "account_id": account_id,
                "livemode": livemode,
                "type": _TYPE_TEXT[kind],
                "related_id": related_id,
                # A new id's characters need no escaping in JSON.
                "payload": payload_json(f'"{event_id}"', kind, now, livemode, data),
                "webhook_url": webhook_url,
                "endpoint": receiver,
                "delivery_status": status,
                "created_at": now,
                "next_attempt_at": due,
            }
        )
    await tx.executemany(_INSERT_EVENT, rows)
    if webhook_url:
        tx.notify(CHANNEL)


def _params(
    event: NewEvent, *, account_id: str, related_id: str, webhook_url: str | None
) -> dict[str, Any]:
    status = DeliveryStatus.PENDING if webhook_url else DeliveryStatus.NONE
    return {
        "id": event.id,
        "account_id": account_id,
        "livemode": event.livemode,
        "type": _TYPE_TEXT[event.type],
        "related_id": related_id,
        "payload": event.payload(),
        "webhook_url": webhook_url,
        # The delivery loop's per-endpoint cap reads this key (`relay.events.due`).
        "endpoint": endpoint(webhook_url) if webhook_url else None,
        "delivery_status": _DELIVERY_TEXT[status],
        "created_at": event.created_at,
        "next_attempt_at": event.created_at if webhook_url else None,
    }


async def record(
    tx: Tx, event: NewEvent, *, account_id: str, related_id: str, webhook_url: str | None
) -> None:
    params = _params(event, account_id=account_id, related_id=related_id, webhook_url=webhook_url)
    await tx.execute(_INSERT_EVENT, params)
    if webhook_url:
        tx.notify(CHANNEL)


# --- delivery: what a claim holds, how an attempt ended ----------------------


@dataclass(frozen=True)
class Claim:
    """One delivery attempt a worker holds the lease for."""

    event_id: str
    account_id: str
    webhook_url: str
    payload: bytes
    number: int  # 1 for the first attempt
    owner: str
    livemode: bool  # whose secrets sign it: the event's own mode's


@dataclass(frozen=True)
class AttemptRecord:
    at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int | None
    # The start of the receiver's answer (`webhooks.transport.excerpt`).
    response_excerpt: str | None = None


# The lease owner in the WHERE: a worker that overran its lease must not
# overwrite the state written by the worker that took the row over.
_RECORD_ATTEMPT = Sql(
    "UPDATE events SET delivery_status = :outcome, next_attempt_at = :next_attempt_at,"
    " lease_until = NULL, lease_owner = NULL WHERE id = :event_id AND lease_owner = :owner"
    " AND attempt_count = :number AND delivery_status = 'pending'"
)
_INSERT_ATTEMPT = Sql(
    "INSERT INTO webhook_attempts (event_id, number, at, status_code, error, duration_ms,"
    " response_excerpt) VALUES (:event_id, :number, :at, :status_code, :error, :duration_ms,"
    " :response_excerpt)"
)


async def record_attempt(
    tx: Tx,
    claim: Claim,
    attempt: AttemptRecord,
    *,
    outcome: DeliveryStatus,
    next_attempt_at: datetime | None,
) -> bool:
    """Store how an attempt ended; False when the lease was lost to another worker."""
    changed = await tx.execute(
        _RECORD_ATTEMPT,
        {
            "event_id": claim.event_id,
            "owner": claim.owner,
            "number": claim.number,
            "outcome": outcome.value,
            "next_attempt_at": next_attempt_at,
        },
    )
    if changed != 1:
        return False
    await insert_attempt(tx, claim.event_id, claim.number, attempt)
    return True


async def insert_attempt(tx: Tx, event_id: str, number: int, attempt: AttemptRecord) -> None:
    # Not dataclasses.asdict: it deep-copies every field, and this runs per delivery.
    params = {
        "event_id": event_id,
        "number": number,
        "at": attempt.at,
        "status_code": attempt.status_code,
        "error": attempt.error,
        "duration_ms": attempt.duration_ms,
        "response_excerpt": attempt.response_excerpt,
    }
    await tx.execute(_INSERT_ATTEMPT, params)


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


_COLUMNS = "id, type, payload, webhook_url, delivery_status"
_SCOPE = "account_id = :account_id AND livemode = :livemode"
_LOAD = Sql(f"SELECT {_COLUMNS} FROM events WHERE {_SCOPE} AND id = :id")
_ATTEMPTS = Sql(
    "SELECT event_id, at, status_code, error, duration_ms FROM webhook_attempts"
    " WHERE event_id IN (SELECT value FROM json_each(:ids)) ORDER BY event_id, number, id",
    postgres="SELECT event_id, at, status_code, error, duration_ms FROM webhook_attempts"
    " WHERE event_id IN (SELECT json_array_elements_text(CAST(:ids AS json)))"
    " ORDER BY event_id, number, id",
)
# One statement per combination of filters, built when first asked for.
_FILTERS = (
    ("related", "related_id = :related"),
    ("type", "type = :type"),
    ("delivery_status", "delivery_status = :delivery_status"),
    ("starting_after", "id < :starting_after"),
    ("ending_before", "id > :ending_before"),
)
_PAGES: dict[tuple[str, ...], Sql] = {}


async def load(tx: Tx, *, account_id: str, livemode: bool, event_id: str) -> StoredEvent | None:
    row = await tx.fetchrow(_LOAD, {"account_id": account_id, "livemode": livemode, "id": event_id})
    if row is None:
        return None
    return _from_row(row, (await attempts_for(tx, [row["id"]]))[row["id"]])


def _page_statement(given: tuple[str, ...], *, backwards: bool) -> Sql:
    key = (*given, "backwards" if backwards else "forwards")
    statement = _PAGES.get(key)
    if statement is None:
        conditions = [_SCOPE, *(sql for name, sql in _FILTERS if name in given)]
        order = "ASC" if backwards else "DESC"
        statement = _PAGES[key] = Sql(
            f"SELECT {_COLUMNS} FROM events WHERE {' AND '.join(conditions)}"
            f" ORDER BY id {order} LIMIT :limit"
        )
    return statement


async def list_page(
    tx: Tx, *, account_id: str, livemode: bool, query: EventQuery
) -> tuple[list[StoredEvent], bool]:
    """Newest first, keyset-paginated on the time-sortable id, like verifications."""
    values: dict[str, Any] = {
        "related": query.related,
        "type": None if query.type is None else query.type.value,
        "delivery_status": None if query.delivery_status is None else query.delivery_status.value,
        "starting_after": query.starting_after,
        "ending_before": query.ending_before,
    }
    given = tuple(name for name, _ in _FILTERS if values[name] is not None)
    backwards = query.ending_before is not None
    params = {name: values[name] for name in given}
    params.update(account_id=account_id, livemode=livemode, limit=query.limit + 1)
    rows = await tx.fetch(_page_statement(given, backwards=backwards), params)
    has_more = len(rows) > query.limit
    rows = rows[: query.limit]
    if backwards:
        rows.reverse()
    grouped = await attempts_for(tx, [r["id"] for r in rows])
    return [_from_row(r, grouped[r["id"]]) for r in rows], has_more


def _from_row(row: Row, attempts: Sequence[AttemptRecord]) -> StoredEvent:
    return StoredEvent(
        id=row["id"],
        type=_TYPE_OF[row["type"]],
        payload=row["payload"],
        webhook_url=row["webhook_url"],
        delivery_status=_DELIVERY_STATUS_OF[row["delivery_status"]],
        attempts=tuple(attempts),
    )


async def attempts_for(tx: Tx, ids: Sequence[str]) -> dict[str, list[AttemptRecord]]:
    grouped: dict[str, list[AttemptRecord]] = {i: [] for i in ids}
    if not ids:
        return grouped
    for row in await tx.fetch(_ATTEMPTS, {"ids": list(ids)}):
        grouped[row["event_id"]].append(
            AttemptRecord(moment(row["at"]), row["status_code"], row["error"], row["duration_ms"])
        )
    return grouped
