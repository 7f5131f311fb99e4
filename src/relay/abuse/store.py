"""SQL for abuse counters and destination blocks, run inside the caller's unit of work.

Counters change only through one `INSERT … ON CONFLICT DO UPDATE SET n = n + excluded.n`,
so concurrent requests in several processes add up instead of overwriting each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from relay.abuse.models import Bucket, Kind
from relay.accounts.models import Scope
from relay.db.sql import Row, Sql, Tx, moment

_SCOPE = "account_id = :scope_account AND livemode = :scope_livemode"
_COUNTS = "bucket, sends, approvals, failed_checks"

_BUMP = Sql(
    "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, sends,"
    " approvals, failed_checks) VALUES (:account_id, :livemode, :kind, :subject, :bucket,"
    " :sends, :approvals, :failed_checks)"
    " ON CONFLICT (account_id, livemode, kind, subject, bucket) DO UPDATE SET"
    " sends = abuse_counters.sends + excluded.sends,"
    " approvals = abuse_counters.approvals + excluded.approvals,"
    " failed_checks = abuse_counters.failed_checks + excluded.failed_checks"
)
_WINDOW = Sql(
    f"SELECT {_COUNTS} FROM abuse_counters"
    f" WHERE {_SCOPE} AND kind = :kind AND subject = :subject AND bucket >= :since"
)
_OPENED = Sql(
    f"SELECT created_at FROM verifications"
    f" WHERE {_SCOPE} AND to_number = :to AND created_at > :since"
)

# Up to four (kind, subject, since) windows in one round trip: a send reads the
# number's, its prefix's, its country's and the account's counters together.
# One indexed SELECT per window, joined by UNION: with the windows OR-ed in one
# WHERE, SQLite searched the primary key by account and mode only and read every
# counter the account had. UNION, not UNION ALL: short lists are padded by
# repeating a window, whose rows must count once.
_MAX_WINDOWS = 4
_WINDOWS = Sql(
    " UNION ".join(
        f"SELECT kind, subject, {_COUNTS} FROM abuse_counters WHERE {_SCOPE}"
        f" AND kind = :kind_{i} AND subject = :subject_{i} AND bucket >= :since_{i}"
        for i in range(_MAX_WINDOWS)
    )
)
_MAX_BLOCKS = 2
_BLOCKS = Sql(
    " UNION ".join(
        f"SELECT kind, subject, blocked_until FROM destination_blocks WHERE {_SCOPE}"
        f" AND kind = :kind_{i} AND subject = :subject_{i}"
        for i in range(_MAX_BLOCKS)
    )
)
_BLOCK = Sql(
    "INSERT INTO destination_blocks (account_id, livemode, kind, subject, blocked_until,"
    " created_at) VALUES (:scope_account, :scope_livemode, :kind, :subject, :until, :now)"
    " ON CONFLICT (account_id, livemode, kind, subject) DO UPDATE SET"
    " blocked_until = excluded.blocked_until, created_at = excluded.created_at"
)
_PRUNE_COUNTERS = Sql("DELETE FROM abuse_counters WHERE bucket < :before")
_PRUNE_BLOCKS = Sql("DELETE FROM destination_blocks WHERE blocked_until <= :now")

Window = tuple[Kind, str, datetime]


def _scope(scope: Scope) -> dict[str, Any]:
    return {"scope_account": scope.account_id, "scope_livemode": scope.livemode}


def _counter(
    scope: Scope,
    kind: Kind,
    subject: str,
    *,
    bucket: datetime,
    sends: int,
    approvals: int,
    failed_checks: int,
) -> dict[str, Any]:
    return {
        "account_id": scope.account_id,
        "livemode": scope.livemode,
        "kind": kind.value,
        "subject": subject,
        "bucket": bucket,
        "sends": sends,
        "approvals": approvals,
        "failed_checks": failed_checks,
    }


def _bucket(row: Row) -> Bucket:
    return Bucket(moment(row["bucket"]), row["sends"], row["approvals"], row["failed_checks"])


async def windows(
    tx: Tx, scope: Scope, wanted: Sequence[Window]
) -> dict[tuple[Kind, str], list[Bucket]]:
    """The counters of each (kind, subject) since its own start, in one query."""
    if not 0 < len(wanted) <= _MAX_WINDOWS:
        raise ValueError(f"between 1 and {_MAX_WINDOWS} windows at a time")
    padded = [*wanted, *[wanted[-1]] * (_MAX_WINDOWS - len(wanted))]
    params = _scope(scope)
    for i, (kind, subject, since) in enumerate(padded):
        params.update({f"kind_{i}": kind.value, f"subject_{i}": subject, f"since_{i}": since})
    found: dict[tuple[Kind, str], list[Bucket]] = {(k, s): [] for k, s, _ in wanted}
    for row in await tx.fetch(_WINDOWS, params):
        found[(Kind(row["kind"]), row["subject"])].append(_bucket(row))
    return found


async def blocks(
    tx: Tx, scope: Scope, subjects: Sequence[tuple[Kind, str]]
) -> dict[tuple[Kind, str], datetime]:
    """When each of up to two destinations' blocks end, in one query."""
    if not 0 < len(subjects) <= _MAX_BLOCKS:
        raise ValueError(f"between 1 and {_MAX_BLOCKS} subjects at a time")
    padded = [*subjects, *[subjects[-1]] * (_MAX_BLOCKS - len(subjects))]
    params = _scope(scope)
    for i, (kind, subject) in enumerate(padded):
        params.update({f"kind_{i}": kind.value, f"subject_{i}": subject})
    return {
        (Kind(row["kind"]), row["subject"]): moment(row["blocked_until"])
        for row in await tx.fetch(_BLOCKS, params)
    }


async def bump_many(
    tx: Tx,
    scope: Scope,
    rows: Sequence[tuple[Kind, str, int, int, int]],
    *,
    bucket: datetime,
) -> None:
    """Add (kind, subject, sends, approvals, failed_checks) to several counters at once."""
    await tx.executemany(
        _BUMP,
        [
            _counter(
                scope,
                kind,
                subject,
                bucket=bucket,
                sends=sends,
                approvals=approvals,
                failed_checks=failed_checks,
            )
            for kind, subject, sends, approvals, failed_checks in rows
        ],
    )


async def window(
    tx: Tx, scope: Scope, kind: Kind, subject: str, *, since: datetime
) -> list[Bucket]:
    params = {**_scope(scope), "kind": kind.value, "subject": subject, "since": since}
    return [_bucket(row) for row in await tx.fetch(_WINDOW, params)]


async def block(
    tx: Tx, scope: Scope, kind: Kind, subject: str, *, until: datetime, now: datetime
) -> None:
    params = {**_scope(scope), "kind": kind.value, "subject": subject, "until": until, "now": now}
    await tx.execute(_BLOCK, params)


async def verifications_opened(tx: Tx, scope: Scope, to: str, *, since: datetime) -> list[datetime]:
    """Creation times of the number's recent verifications (index on account, mode, number)."""
    rows = await tx.fetch(_OPENED, {**_scope(scope), "to": to, "since": since})
    return [moment(row["created_at"]) for row in rows]


async def prune(tx: Tx, *, counters_before: datetime, now: datetime) -> int:
    counters = await tx.execute(_PRUNE_COUNTERS, {"before": counters_before})
    blocks = await tx.execute(_PRUNE_BLOCKS, {"now": now})
    return counters + blocks
