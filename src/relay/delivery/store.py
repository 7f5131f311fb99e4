"""SQL for attempts: plain async functions of a Tx.

Every attempt transition is one conditional UPDATE that restates the state it
leaves (`WHERE status = 'sent'`), so a receipt and a receipt deadline, or two
dispatchers, racing on one attempt cannot both win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relay.carriers.base import CHANNELS, Channel
from relay.db.sql import Row, Sql, Tx, document
from relay.delivery.attempts import Attempt, AttemptStatus
from relay.delivery.owners import OwnerRef
from relay.ids import new_id
from relay.records import changed, fast_init

# An enum made from its value is a Python call through EnumType; a dict is one lookup.
_STATUS_OF: dict[str, AttemptStatus] = {member.value: member for member in AttemptStatus}
# An enum's `.value` is a Python property: read per attempt written.
_TEXT_OF = {status: status.value for status in AttemptStatus}


@fast_init
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
    # The channel of each carrier of `route`, in the same order.
    channels: tuple[Channel, ...]

    @property
    def channel(self) -> Channel:
        return self.channels[self.position]

    def answered(self, status: AttemptStatus, carrier_message_id: str | None) -> AttemptRow:
        """As a carrier's answer leaves it, before it is written."""
        return changed(self, status=status, carrier_message_id=carrier_message_id)

    @property
    def fallback_channel(self) -> bool:
        """On a channel after the first one its owner asked for."""
        return self.channel != self.channels[0]

    @property
    def owner(self) -> OwnerRef:
        if self.verification_id is not None:
            return OwnerRef("verification", self.verification_id)
        assert self.message_id is not None  # the insert always sets exactly one
        return OwnerRef("message", self.message_id)


_COLUMNS = (
    "id, verification_id, message_id, carrier, status, route, position, carrier_message_id,"
    " route_channels"
)


def _channels(raw: object, length: int) -> tuple[Channel, ...]:
    """A route's channels as written; a route written before channels existed is all SMS."""
    found = document(raw) if raw is not None else None
    if not isinstance(found, list) or len(found) != length:
        return _all_sms(length)
    known: list[Channel] = [next((c for c in CHANNELS if c == value), "sms") for value in found]
    return tuple(known)


def _all_sms(length: int) -> tuple[Channel, ...]:
    sms: Channel = "sms"
    return (sms,) * length


def _row(row: Row) -> AttemptRow:
    route = tuple(document(row["route"]) or (row["carrier"],))
    return AttemptRow(
        id=row["id"],
        verification_id=row["verification_id"],
        message_id=row["message_id"],
        carrier=row["carrier"],
        status=_STATUS_OF[row["status"]],
        route=route,
        position=row["position"],
        carrier_message_id=row["carrier_message_id"],
        channels=_channels(row["route_channels"], len(route)),
    )


_INSERT = Sql(
    "INSERT INTO attempts (id, verification_id, message_id, carrier, status, error, at,"
    " updated_at, route, position, lease_owner, lease_until, carrier_message_id,"
    " report_due_at, segments, channel, route_channels) VALUES (:id, :verification_id,"
    " :message_id, :carrier, :status, :error, :now, :now, :route, :position, :lease_owner,"
    " :lease_until, :carrier_message_id, :report_due_at, :segments, :channel, :route_channels)"
)
_LOAD = Sql(f"SELECT {_COLUMNS} FROM attempts WHERE id = :attempt_id")
_BY_CARRIER_ID = Sql(
    f"SELECT {_COLUMNS} FROM attempts"
    " WHERE carrier = :carrier AND carrier_message_id = :carrier_message_id"
)
# One attempt by id binds the state it leaves, as `_FINISH` does: stated as a
# constant, it would let the partial index of queued attempts serve the statement,
# which PostgreSQL, on tables without statistics yet, preferred to the key.
_FROM_QUEUED = "WHERE id = :attempt_id AND status = :queued"
_QUEUED = AttemptStatus.QUEUED.value
# Out of a dispatcher's hands: no lease, no owner.
_RELEASED = "lease_until = NULL, lease_owner = NULL, updated_at = :now"
# `segments` is what the carrier bills from here on, whatever its receipt says.
_RECORD_SENT = Sql(
    "UPDATE attempts SET status = 'sent', carrier_message_id = :carrier_message_id,"
    " segments = :segments,"
    f" report_due_at = :report_due_at, {_RELEASED} {_FROM_QUEUED}"
)
# Sent and delivered in one step: a carrier that answered with a final receipt
# at once (the sandbox).
_RECORD_DELIVERED = Sql(
    "UPDATE attempts SET status = 'delivered', carrier_message_id = :carrier_message_id,"
    " segments = :segments,"
    f" error = NULL, report_due_at = NULL, {_RELEASED} {_FROM_QUEUED}"
)
_FINISH = Sql(
    "UPDATE attempts SET status = :to_status, error = :error, report_due_at = NULL,"
    f" {_RELEASED} WHERE id = :attempt_id AND status = :from_status"
)
_POSTPONE = Sql(f"UPDATE attempts SET lease_until = :until, lease_owner = NULL {_FROM_QUEUED}")


@fast_init
@dataclass(frozen=True)
class NewAttempt:
    """An attempt as it is first written: queued, or already answered by a carrier that
    needed no I/O (`relay.delivery.at_once`)."""

    row: AttemptRow
    error: dict[str, Any] | None = None
    # A queued attempt's lease keeps other dispatchers off it until `lease_until`.
    lease_owner: str | None = None
    lease_until: datetime | None = None
    report_due_at: datetime | None = None
    # Billed segments, once a carrier accepted the SMS.
    segments: int | None = None

    def view(self, *, at: datetime, livemode: bool) -> Attempt:
        """The attempt as the API shows it."""
        row = self.row
        return Attempt(row.id, row.status, row.carrier, at, self.error, livemode, row.channel)


async def insert(tx: Tx, attempts: Sequence[NewAttempt], *, now: datetime) -> None:
    """Every attempt a send opens, in one statement."""
    await tx.executemany(
        _INSERT,
        [
            {
                "id": new.row.id,
                "verification_id": new.row.verification_id,
                "message_id": new.row.message_id,
                "carrier": new.row.carrier,
                "status": _TEXT_OF[new.row.status],
                "error": new.error,
                "now": now,
                "route": list(new.row.route),
                "position": new.row.position,
                "lease_owner": new.lease_owner,
                "lease_until": new.lease_until,
                "carrier_message_id": new.row.carrier_message_id,
                "report_due_at": new.report_due_at,
                "segments": new.segments,
                "channel": new.row.channel,
                # SMS-only routes keep the column NULL, as they were before channels.
                "route_channels": None
                if set(new.row.channels) == {"sms"}
                else list(new.row.channels),
            }
            for new in attempts
        ],
    )


async def insert_queued(
    tx: Tx,
    attempt: AttemptRow,
    *,
    now: datetime,
    lease_owner: str | None,
    lease_until: datetime,
) -> None:
    """A queued attempt; its lease keeps other dispatchers off it until `lease_until`."""
    await insert(
        tx, [NewAttempt(attempt, lease_owner=lease_owner, lease_until=lease_until)], now=now
    )


def queued(
    owner: OwnerRef,
    route: tuple[str, ...],
    position: int,
    channels: tuple[Channel, ...] | None = None,
) -> AttemptRow:
    """A new attempt on the route's carrier at `position`, not written yet. `channels`:
    each carrier's channel (None: all SMS)."""
    return AttemptRow(
        id=new_id("att"),
        verification_id=owner.id if owner.kind == "verification" else None,
        message_id=owner.id if owner.kind == "message" else None,
        carrier=route[position],
        status=AttemptStatus.QUEUED,
        route=route,
        position=position,
        carrier_message_id=None,
        channels=_all_sms(len(route)) if channels is None else channels,
    )


async def load(tx: Tx, attempt_id: str) -> AttemptRow | None:
    row = await tx.fetchrow(_LOAD, {"attempt_id": attempt_id})
    return None if row is None else _row(row)


async def by_carrier_message(tx: Tx, carrier: str, carrier_message_id: str) -> AttemptRow | None:
    params = {"carrier": carrier, "carrier_message_id": carrier_message_id}
    row = await tx.fetchrow(_BY_CARRIER_ID, params)
    return None if row is None else _row(row)


async def record_sent(
    tx: Tx,
    attempt_id: str,
    *,
    carrier_message_id: str,
    segments: int,
    report_due_at: datetime,
    now: datetime,
) -> bool:
    params = {
        "attempt_id": attempt_id,
        "carrier_message_id": carrier_message_id,
        "segments": segments,
        "report_due_at": report_due_at,
        "now": now,
        "queued": _QUEUED,
    }
    return await tx.execute(_RECORD_SENT, params) == 1


async def record_delivered(
    tx: Tx, attempt_id: str, *, carrier_message_id: str, segments: int, now: datetime
) -> bool:
    """A queued attempt whose submit came back delivered; false if the lease was lost."""
    params = {
        "attempt_id": attempt_id,
        "carrier_message_id": carrier_message_id,
        "segments": segments,
        "now": now,
        "queued": _QUEUED,
    }
    return await tx.execute(_RECORD_DELIVERED, params) == 1


async def finish(
    tx: Tx,
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
        "from_status": _TEXT_OF[from_status],
        "to_status": _TEXT_OF[to_status],
        "error": error,
        "now": now,
    }
    return await tx.execute(_FINISH, params) == 1


async def postpone(tx: Tx, attempt_id: str, *, until: datetime) -> None:
    """Throttled: the attempt stays queued, free for any dispatcher from `until` on."""
    await tx.execute(_POSTPONE, {"attempt_id": attempt_id, "until": until, "queued": _QUEUED})


# The sweeps write the states into the SQL: the partial indexes
# (`WHERE status = 'queued'`, `'sent'`) serve a query only if it states their
# predicate as a constant.
_QUEUED_DUE = "status = 'queued' AND lease_until <= :now"
_SENT_DUE = "status = 'sent' AND report_due_at <= :now"
_DUE_IDS = (
    f"SELECT id FROM attempts WHERE {_QUEUED_DUE} AND id NOT IN ({{busy}})"
    " ORDER BY lease_until LIMIT :limit"
)
# The UPDATE restates the rule: a row claimed by another dispatcher meanwhile is left alone.
_CLAIM = (
    "UPDATE attempts SET lease_owner = :owner, lease_until = :until"
    f" WHERE id IN ({_DUE_IDS}{{lock}}) AND {_QUEUED_DUE} RETURNING id"
)
_CLAIM_QUEUED = Sql(
    _CLAIM.format(busy="SELECT value FROM json_each(:busy)", lock=""),
    # PostgreSQL skips rows another claimer holds; SQLite's write transaction
    # already excludes other writers.
    postgres=_CLAIM.format(
        busy="SELECT json_array_elements_text(CAST(:busy AS json))", lock=" FOR UPDATE SKIP LOCKED"
    ),
)
_OVERDUE = f"SELECT {_COLUMNS} FROM attempts WHERE {_SENT_DUE} ORDER BY report_due_at LIMIT :limit"
_OVERDUE_REPORTS = Sql(_OVERDUE, postgres=f"{_OVERDUE} FOR UPDATE SKIP LOCKED")


async def claim_queued(
    tx: Tx,
    *,
    now: datetime,
    owner: str,
    lease_until: datetime,
    limit: int,
    busy: Sequence[str] = (),
) -> list[str]:
    """Lease queued attempts whose lease has passed (new, throttled, or a dead owner's)."""
    params = {"now": now, "owner": owner, "until": lease_until, "limit": limit, "busy": list(busy)}
    return [row["id"] for row in await tx.fetch(_CLAIM_QUEUED, params)]


async def overdue_reports(tx: Tx, *, now: datetime, limit: int) -> list[AttemptRow]:
    """Sent attempts whose receipt deadline has passed."""
    return [_row(r) for r in await tx.fetch(_OVERDUE_REPORTS, {"now": now, "limit": limit})]


# --- cheap looks before a write transaction --------------------------------------
# The dispatch loop polls; on SQLite every write transaction takes the one
# write lock, so each round first looks, read-only, whether there is work.

_ANY_CLAIMABLE = Sql(f"SELECT id FROM attempts WHERE {_QUEUED_DUE} LIMIT 1")
_ANY_OVERDUE = Sql(f"SELECT id FROM attempts WHERE {_SENT_DUE} LIMIT 1")
_ANY_EARLY = Sql(
    "SELECT r.id FROM early_reports r JOIN attempts a"
    " ON a.carrier = r.carrier AND a.carrier_message_id = r.carrier_message_id LIMIT 1"
)


async def work_waiting(tx: Tx, *, now: datetime) -> tuple[bool, bool, bool]:
    """(claimable attempts, overdue receipts, parked receipts that now match) exist."""
    params = {"now": now}
    return (
        await tx.fetchrow(_ANY_CLAIMABLE, params) is not None,
        await tx.fetchrow(_ANY_OVERDUE, params) is not None,
        await tx.fetchrow(_ANY_EARLY) is not None,
    )
