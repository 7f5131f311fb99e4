"""SQL for verifications: plain async functions of a Tx, run inside one unit of work.

Every state change is one conditional UPDATE whose WHERE clause restates the
rule, so two processes racing on one verification cannot both win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relay.abuse.store import add_failed_check, failed_check_bucket, failed_check_from
from relay.accounts.models import Scope
from relay.accounts.template_store import has_templates
from relay.carriers.base import CHANNELS, Channel
from relay.db.sql import Row, Sql, Tx, document, flag, json_text, moment, moment_or_none
from relay.delivery.joined import JOINED_ATTEMPT_COLUMNS, joined_attempts
from relay.delivery.owners import Sendable
from relay.errors import ResourceMissing
from relay.records import fast_init
from relay.verifications.models import (
    CHECK_LIMIT,
    Attempt,
    CountedCheck,
    Status,
    Verification,
)

# An enum made from its value is a Python call through EnumType; a dict is one lookup.
_STATUS_OF: dict[str, Status] = {member.value: member for member in Status}
# An enum's `.value` is a Python property: read once.
_PENDING = Status.PENDING.value


@fast_init
@dataclass(frozen=True)
class NewVerification:
    id: str
    # Where its sends go: the number, or the email address as given.
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
    channels: tuple[Channel, ...] = ("sms",)
    # An email address's mailbox (`Destination.mailbox`); None for a number.
    mailbox: str | None = None


def joined_channels(channels: tuple[Channel, ...]) -> str:
    """As the `channels` column keeps them: "whatsapp,sms"."""
    return ",".join(channels)


def split_channels(raw: str | None) -> tuple[Channel, ...]:
    found = tuple(c for name in (raw or "sms").split(",") for c in CHANNELS if c == name)
    return found or ("sms",)


def from_row(row: Row, found: Sequence[Attempt] = (), scope: Scope | None = None) -> Verification:
    """`scope`: the one the row was read in, when it leaves out the scope's columns."""
    return Verification(
        id=row["id"],
        account_id=row["account_id"] if scope is None else scope.account_id,
        livemode=flag(row["livemode"]) if scope is None else scope.livemode,
        # `to_number` is the destination as limits count it; an email's own spelling is
        # `address` (NULL for a number).
        to=row["address"] or row["to_number"],
        country=row["country"],
        sender=row["sender"],
        locale=row["locale"],
        code_length=row["code_length"],
        status=_STATUS_OF[row["status"]],
        checks=row["checks"],
        sends=row["sends"],
        metadata=document(row["metadata"]),
        webhook_url=row["webhook_url"],
        created_at=moment(row["created_at"]),
        updated_at=moment(row["updated_at"]),
        expires_at=moment(row["expires_at"]),
        last_sent_at=moment(row["last_sent_at"]),
        approved_at=moment_or_none(row["approved_at"]),
        canceled_at=moment_or_none(row["canceled_at"]),
        attempts=tuple(found),
        channels=split_channels(row["channels"]),
    )


_SCOPED_COLUMNS = ("account_id", "livemode")
# Everything but the code's MAC and its sealed copy.
PUBLIC = (
    "id, account_id, livemode, to_number, country, sender, locale, code_length, status,"
    " checks, sends, metadata, webhook_url, created_at, updated_at, expires_at, last_sent_at,"
    " approved_at, canceled_at, channels, address"
)
PUBLIC_OF_V = ", ".join(f"v.{name.strip()}" for name in PUBLIC.split(","))
# Without the scope's two columns: a read in a scope has them (`joined`).
IN_SCOPE_OF_V = ", ".join(
    f"v.{name}" for name in (n.strip() for n in PUBLIC.split(",")) if name not in _SCOPED_COLUMNS
)
SCOPED = "account_id = :scope_account AND livemode = :scope_livemode"
_THIS = f"{SCOPED} AND id = :verification_id"
# Sweeps and by-number lookups write the state into the SQL: the partial indexes
# (`WHERE status = 'pending'`) serve a query only if it states their predicate.
# A statement on one verification by id binds it (`:pending`) instead, so that
# no partial index can serve it and it takes the primary key: on a table without
# statistics yet, PostgreSQL's plans priced those small indexes below the key and
# walked every pending verification of the account (tests/db/test_generic_plans.py).
_OPEN = f"{_THIS} AND status = :pending AND expires_at > :now"
# A verification with its attempts, oldest first, in one round trip: one row
# per attempt (an outer join, so one row with NULL attempt columns if none).
_WITH_ATTEMPTS = (
    "SELECT {columns}, " + JOINED_ATTEMPT_COLUMNS + " FROM verifications v"
    " LEFT OUTER JOIN attempts a ON a.verification_id = v.id WHERE {where} ORDER BY a.id"
)
SCOPE_OF_V = "v.account_id = :scope_account AND v.livemode = :scope_livemode"
# The same on SQLite, kept from the indexes (`+`): with `v.id = ...` SQLite then finds
# the verification by its primary key, one row, and reads its attempts in their index's
# order; by the scope's index it could not tell one row comes back, and sorted them.
SCOPE_BY_KEY = "+v.account_id = :scope_account AND +v.livemode = :scope_livemode"
_LOAD = Sql(
    _WITH_ATTEMPTS.format(
        columns=IN_SCOPE_OF_V, where=f"{SCOPE_BY_KEY} AND v.id = :verification_id"
    ),
    postgres=_WITH_ATTEMPTS.format(
        columns=IN_SCOPE_OF_V, where=f"{SCOPE_OF_V} AND v.id = :verification_id"
    ),
    wide=True,
)
# Without a scope: the delivery layer's load, once per event it records.
_LOAD_ANY = Sql(
    _WITH_ATTEMPTS.format(columns=PUBLIC_OF_V, where="v.id = :verification_id"), wide=True
)
# A resend's one read: the verification, its attempts and its sealed code.
_SEALED = (
    f"SELECT {IN_SCOPE_OF_V}, v.sealed_code, {JOINED_ATTEMPT_COLUMNS} FROM verifications v"
    " LEFT OUTER JOIN attempts a ON a.verification_id = v.id"
    " WHERE {scope} AND v.id = :verification_id ORDER BY a.id"
)
_LOAD_SEALED = Sql(
    _SEALED.format(scope=SCOPE_BY_KEY), postgres=_SEALED.format(scope=SCOPE_OF_V), wide=True
)
_INSERT_VERIFICATION = Sql(
    "INSERT INTO verifications (id, account_id, livemode, to_number, country, sender, locale,"
    " code_length, code_mac, sealed_code, status, checks, sends, metadata, webhook_url,"
    " created_at, updated_at, expires_at, last_sent_at, channels, address) VALUES (:id,"
    " :scope_account, :scope_livemode, :to, :country, :sender, :locale, :code_length,"
    " :code_mac, :sealed_code, 'pending', 0, 1, :metadata, :webhook_url, :now, :now,"
    " :expires_at, :now, :channels, :address)"
)
_COUNT_RESEND = Sql(
    "UPDATE verifications SET sends = sends + 1, last_sent_at = :now, updated_at = :now,"
    f" channels = :channels WHERE {_OPEN} AND sends = :seen_sends"
)
# `models.count_check`, the check rule, as one statement: the WHERE clause is
# when a check counts, the CASEs what it does (SET reads the row as it was).
# tests/db/test_check_rule.py walks the rule's inputs and shows the two agree.
_COUNT_CHECK_SQL = (
    "UPDATE verifications SET checks = checks + 1,"
    " status = CASE WHEN {correct} THEN 'approved'"
    " WHEN checks + 1 >= {limit} THEN 'max_attempts_reached' ELSE 'pending' END,"
    " updated_at = :now,"
    " approved_at = CASE WHEN {correct} THEN {now} ELSE approved_at END,"
    # A closed verification never sends again: drop the sealed code.
    " sealed_code = CASE WHEN {correct} OR checks + 1 >= {limit} THEN NULL ELSE sealed_code END"
    " WHERE {open} AND checks < {limit} RETURNING status, checks"
)
_COUNT_CHECK = Sql(
    _COUNT_CHECK_SQL.format(correct=":correct", now=":now", limit=CHECK_LIMIT, open=_OPEN),
    # PostgreSQL cannot infer a parameter's type from CASE WHEN alone.
    postgres=_COUNT_CHECK_SQL.format(
        correct="CAST(:correct AS boolean)",
        now="CAST(:now AS timestamptz)",
        limit=CHECK_LIMIT,
        open=_OPEN,
    ),
)
# A wrong code that leaves the verification pending: the rule above with its CASEs
# decided (no event, nothing to close or drop). On PostgreSQL the number's wrong-code
# counter is written by the same statement, so it commits alone, in autocommit.
_COUNT_WRONG_SQL = (
    "UPDATE verifications SET checks = checks + 1, updated_at = :now"
    f" WHERE {_OPEN} AND checks < {CHECK_LIMIT - 1} RETURNING checks"
)
_COUNT_WRONG = Sql(
    _COUNT_WRONG_SQL,
    postgres=f"WITH counted AS ({_COUNT_WRONG_SQL}, account_id, livemode, to_number),"
    f" bumped AS ({failed_check_from('counted')}) SELECT checks FROM counted",
)
_CANCEL = Sql(
    "UPDATE verifications SET status = 'canceled', canceled_at = :now, updated_at = :now,"
    f" sealed_code = NULL WHERE {_OPEN}"
)
_EXPIRED = "status = 'expired', updated_at = :now, sealed_code = NULL"
# The sweeps state the expiry index's whole predicate (see `db.tables`), which
# only they do: SQLite does not infer its IS NOT NULL from the comparison.
_PAST_TTL = "status = 'pending' AND expires_at IS NOT NULL AND expires_at <= :now"
_EXPIRE_ONE = Sql(
    f"UPDATE verifications SET {_EXPIRED}"
    f" WHERE {_THIS} AND status = :pending AND expires_at <= :now"
)
# The UPDATE restates the rule: a row another sweep closed meanwhile is left alone.
_EXPIRE_DUE = Sql(
    f"UPDATE verifications SET {_EXPIRED} WHERE id IN (SELECT id FROM verifications"
    f" WHERE {_PAST_TTL} ORDER BY expires_at LIMIT :limit) AND {_PAST_TTL} RETURNING id"
)
_ANY_DUE = Sql(f"SELECT id FROM verifications WHERE {_PAST_TTL} LIMIT 1")


def _this(scope: Scope, verification_id: str, **extra: Any) -> dict[str, Any]:
    return {
        **scope.params(),
        "verification_id": verification_id,
        "pending": _PENDING,
        **extra,
    }


async def load(tx: Tx, scope: Scope, verification_id: str) -> Verification | None:
    return joined(await tx.fetch(_LOAD, _this(scope, verification_id)), scope)


async def require(tx: Tx, scope: Scope, verification_id: str) -> Verification:
    """The verification, which must exist (it was read or written in this unit of work)."""
    found = await load(tx, scope, verification_id)
    if found is None:
        raise ResourceMissing(param="id")
    return found


def joined(rows: list[Row], scope: Scope | None = None) -> Verification | None:
    """`scope`: the one the rows were read in, when they leave out its two columns."""
    if not rows:
        return None
    first = rows[0]
    livemode = flag(first["livemode"]) if scope is None else scope.livemode
    return from_row(first, joined_attempts(rows, livemode=livemode), scope)


async def load_sealed(
    tx: Tx, scope: Scope, verification_id: str
) -> tuple[Verification, bytes | None] | None:
    """The verification and its sealed code (None once it closed), for a resend."""
    rows = await tx.fetch(_LOAD_SEALED, _this(scope, verification_id))
    found = joined(rows, scope)
    if found is None:
        return None
    sealed = rows[0]["sealed_code"]
    return found, None if sealed is None else bytes(sealed)


async def insert_verification(tx: Tx, scope: Scope, new: NewVerification, now: datetime) -> None:
    """Write a new pending verification (`as_written` is what it wrote)."""
    await tx.execute(
        _INSERT_VERIFICATION,
        {
            **scope.params(),
            "id": new.id,
            # The mailbox keys the one pending verification's unique index and the limits.
            "to": new.mailbox or new.to,
            "address": None if new.mailbox is None else new.to,
            "country": new.country,
            "sender": new.sender,
            "locale": new.locale,
            "code_length": new.code_length,
            "code_mac": new.code_mac,
            "sealed_code": new.sealed_code,
            "metadata": json_text(new.metadata),
            "webhook_url": new.webhook_url,
            "now": now,
            "expires_at": new.expires_at,
            "channels": joined_channels(new.channels),
        },
    )


def as_written(scope: Scope, new: NewVerification, now: datetime) -> Verification:
    """The verification `insert_verification` writes, without reading it back."""
    return Verification(
        id=new.id,
        account_id=scope.account_id,
        livemode=scope.livemode,
        to=new.to,
        country=new.country,
        sender=new.sender,
        locale=new.locale,
        code_length=new.code_length,
        status=Status.PENDING,
        checks=0,
        sends=1,
        metadata=new.metadata,
        webhook_url=new.webhook_url,
        created_at=now,
        updated_at=now,
        expires_at=new.expires_at,
        last_sent_at=now,
        approved_at=None,
        canceled_at=None,
        channels=new.channels,
    )


async def count_resend(
    tx: Tx,
    scope: Scope,
    verification_id: str,
    *,
    seen_sends: int,
    now: datetime,
    channels: tuple[Channel, ...] = ("sms",),
) -> bool:
    """Record one more send, on `channels`; false if another request resent in between."""
    params = _this(
        scope,
        verification_id,
        seen_sends=seen_sends,
        now=now,
        channels=joined_channels(channels),
    )
    return await tx.execute(_COUNT_RESEND, params) == 1


async def count_check(
    tx: Tx, scope: Scope, verification_id: str, *, correct: bool, now: datetime
) -> CountedCheck | None:
    """Count one check and move the state, atomically; None if it was not open."""
    params = _this(scope, verification_id, correct=correct, now=now)
    row = await tx.fetchrow(_COUNT_CHECK, params)
    return None if row is None else CountedCheck(_STATUS_OF[row["status"]], row["checks"])


async def count_wrong_check(
    tx: Tx, scope: Scope, verification: Verification, *, destination: str, now: datetime
) -> int | None:
    """Count a wrong code that leaves the verification pending, with its destination's
    wrong code (`destination`: its `to_number`, an email's mailbox); its checks since, or
    None if the row as it is now does not allow that."""
    params = _this(scope, verification.id, now=now, bucket=failed_check_bucket(now))
    row = await tx.fetchrow(_COUNT_WRONG, params)
    if row is None:
        return None
    if tx.dialect == "sqlite":
        # SQLite has no UPDATE inside WITH: the counter is the unit's second statement.
        await add_failed_check(tx, scope, destination, at=now)
    return int(row["checks"])


async def cancel(tx: Tx, scope: Scope, verification_id: str, *, now: datetime) -> bool:
    return await tx.execute(_CANCEL, _this(scope, verification_id, now=now)) == 1


async def expire_due(tx: Tx, *, now: datetime, limit: int) -> list[str]:
    """Mark pending verifications past their TTL expired; returns the ids it closed."""
    return [row["id"] for row in await tx.fetch(_EXPIRE_DUE, {"now": now, "limit": limit})]


async def any_due(tx: Tx, *, now: datetime) -> bool:
    return await tx.fetchrow(_ANY_DUE, {"now": now}) is not None


async def expire_one(tx: Tx, scope: Scope, verification_id: str, *, now: datetime) -> bool:
    return await tx.execute(_EXPIRE_ONE, _this(scope, verification_id, now=now)) == 1


async def load_any(tx: Tx, verification_id: str) -> Verification | None:
    """Load without an account scope: for background work only, never for requests."""
    return joined(await tx.fetch(_LOAD_ANY, {"verification_id": verification_id}))


_SENDABLE = Sql(
    # Sent to the address as given: an email's `to_number` is its mailbox.
    "SELECT v.account_id, COALESCE(v.address, v.to_number) AS to_number, v.sender, v.locale,"
    f" v.sealed_code, v.expires_at, a.brand, a.webotp_domain, {has_templates('a')}"
    " FROM verifications v JOIN accounts a ON a.id = v.account_id"
    " WHERE v.id = :verification_id AND v.status = 'pending'"
)


async def sendable(tx: Tx, verification_id: str) -> Sendable | None:
    """Without an account scope, for the delivery layer: None unless it is pending."""
    row = await tx.fetchrow(_SENDABLE, {"verification_id": verification_id})
    return None if row is None else Sendable.from_row(verification_id, row)
