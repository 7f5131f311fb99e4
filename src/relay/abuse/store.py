"""SQL for abuse counters and destination blocks, run inside the caller's transaction.

Counters change only through one `INSERT … ON CONFLICT DO UPDATE SET n = n + excluded.n`,
so concurrent requests in several processes add up instead of overwriting each other.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, bindparam, delete, select, union
from sqlalchemy.dialects import postgresql, sqlite

from relay.abuse.models import Bucket, Kind
from relay.accounts.models import Scope
from relay.db.prepared import Prepared
from relay.db.tables import UtcDateTime, abuse_counters, destination_blocks, verifications

C = abuse_counters.c
B = destination_blocks.c
V = verifications.c
_COUNTER_KEY = ["account_id", "livemode", "kind", "subject", "bucket"]
_BLOCK_KEY = ["account_id", "livemode", "kind", "subject"]


# Built once with bind parameters: constructing these per request cost more than running them.
_SUBJECT = (
    C.account_id == bindparam("scope_account"),
    C.livemode == bindparam("scope_livemode"),
    C.kind == bindparam("kind"),
    C.subject == bindparam("subject"),
)
_WINDOW = Prepared(
    select(C.bucket, C.sends, C.approvals, C.failed_checks).where(
        *_SUBJECT, C.bucket >= bindparam("since", type_=UtcDateTime())
    )
)
_OPENED = Prepared(
    select(V.created_at).where(
        V.account_id == bindparam("scope_account"),
        V.livemode == bindparam("scope_livemode"),
        V.to_number == bindparam("to"),
        V.created_at > bindparam("since", type_=UtcDateTime()),
    )
)


def _insert(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


@functools.cache
def _bump_one(dialect: str) -> Prepared:
    return Prepared(_bump_statement(dialect))


@functools.cache
def _bump_statement(dialect: str) -> Any:
    statement = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(abuse_counters)
    added = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=_COUNTER_KEY,
        set_={
            "sends": C.sends + added.sends,
            "approvals": C.approvals + added.approvals,
            "failed_checks": C.failed_checks + added.failed_checks,
        },
    )


def _subject(scope: Scope, kind: Kind, subject: str, **extra: Any) -> dict[str, Any]:
    return {
        "scope_account": scope.account_id,
        "scope_livemode": scope.livemode,
        "kind": kind.value,
        "subject": subject,
        **extra,
    }


def bump(
    conn: Connection,
    scope: Scope,
    kind: Kind,
    subject: str,
    *,
    bucket: datetime,
    sends: int = 0,
    approvals: int = 0,
    failed_checks: int = 0,
) -> None:
    _bump_one(conn.dialect.name).execute(
        conn,
        {
            "account_id": scope.account_id,
            "livemode": scope.livemode,
            "kind": kind.value,
            "subject": subject,
            "bucket": bucket,
            "sends": sends,
            "approvals": approvals,
            "failed_checks": failed_checks,
        },
    )


# Up to four (kind, subject, since) windows in one round trip: a send reads the
# number's, its prefix's, its country's and the account's counters together.
# One indexed SELECT per window, joined by UNION: with the windows OR-ed in one
# WHERE, SQLite searched the primary key by account and mode only and read every
# counter the account had (9.5 ms per query at 60,000 numbers). UNION, not UNION
# ALL: short lists are padded by repeating a window, whose rows must count once.
_MAX_WINDOWS = 4
_WINDOWS_SQL = union(
    *(
        select(C.kind, C.subject, C.bucket, C.sends, C.approvals, C.failed_checks).where(
            C.account_id == bindparam("scope_account"),
            C.livemode == bindparam("scope_livemode"),
            C.kind == bindparam(f"kind_{i}"),
            C.subject == bindparam(f"subject_{i}"),
            C.bucket >= bindparam(f"since_{i}", type_=UtcDateTime()),
        )
        for i in range(_MAX_WINDOWS)
    )
)
_MAX_BLOCKS = 2
_BLOCKS_SQL = union(
    *(
        select(B.kind, B.subject, B.blocked_until).where(
            B.account_id == bindparam("scope_account"),
            B.livemode == bindparam("scope_livemode"),
            B.kind == bindparam(f"kind_{i}"),
            B.subject == bindparam(f"subject_{i}"),
        )
        for i in range(_MAX_BLOCKS)
    )
)
_WINDOWS = Prepared(_WINDOWS_SQL)
_BLOCKS = Prepared(_BLOCKS_SQL)

Window = tuple[Kind, str, datetime]


def windows(
    conn: Connection, scope: Scope, wanted: Sequence[Window]
) -> dict[tuple[Kind, str], list[Bucket]]:
    """The counters of each (kind, subject) since its own start, in one query."""
    if not 0 < len(wanted) <= _MAX_WINDOWS:
        raise ValueError(f"between 1 and {_MAX_WINDOWS} windows at a time")
    padded = [*wanted, *[wanted[-1]] * (_MAX_WINDOWS - len(wanted))]
    params: dict[str, Any] = {"scope_account": scope.account_id, "scope_livemode": scope.livemode}
    for i, (kind, subject, since) in enumerate(padded):
        params.update({f"kind_{i}": kind.value, f"subject_{i}": subject, f"since_{i}": since})
    found: dict[tuple[Kind, str], list[Bucket]] = {(k, s): [] for k, s, _ in wanted}
    for row in _WINDOWS.execute(conn, params):
        key = (Kind(row.kind), row.subject)
        found[key].append(Bucket(row.bucket, row.sends, row.approvals, row.failed_checks))
    return found


def blocks(
    conn: Connection, scope: Scope, subjects: Sequence[tuple[Kind, str]]
) -> dict[tuple[Kind, str], datetime]:
    """When each of up to two destinations' blocks end, in one query."""
    if not 0 < len(subjects) <= _MAX_BLOCKS:
        raise ValueError(f"between 1 and {_MAX_BLOCKS} subjects at a time")
    padded = [*subjects, *[subjects[-1]] * (_MAX_BLOCKS - len(subjects))]
    params: dict[str, Any] = {"scope_account": scope.account_id, "scope_livemode": scope.livemode}
    for i, (kind, subject) in enumerate(padded):
        params.update({f"kind_{i}": kind.value, f"subject_{i}": subject})
    return {
        (Kind(row.kind), row.subject): row.blocked_until for row in _BLOCKS.execute(conn, params)
    }


def bump_many(
    conn: Connection,
    scope: Scope,
    rows: Sequence[tuple[Kind, str, int, int, int]],
    *,
    bucket: datetime,
) -> None:
    """Add (kind, subject, sends, approvals, failed_checks) to several counters at once."""
    _bump_one(conn.dialect.name).execute_many(
        conn,
        [
            {
                "account_id": scope.account_id,
                "livemode": scope.livemode,
                "kind": kind.value,
                "subject": subject,
                "bucket": bucket,
                "sends": sends,
                "approvals": approvals,
                "failed_checks": failed_checks,
            }
            for kind, subject, sends, approvals, failed_checks in rows
        ],
    )


def window(
    conn: Connection, scope: Scope, kind: Kind, subject: str, *, since: datetime
) -> list[Bucket]:
    rows = _WINDOW.execute(conn, _subject(scope, kind, subject, since=since))
    return [Bucket(row.bucket, row.sends, row.approvals, row.failed_checks) for row in rows]


def block(
    conn: Connection, scope: Scope, kind: Kind, subject: str, *, until: datetime, now: datetime
) -> None:
    statement = _insert(conn, destination_blocks).values(
        account_id=scope.account_id,
        livemode=scope.livemode,
        kind=kind.value,
        subject=subject,
        blocked_until=until,
        created_at=now,
    )
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=_BLOCK_KEY,
            set_={"blocked_until": statement.excluded.blocked_until, "created_at": now},
        )
    )


def verifications_opened(
    conn: Connection, scope: Scope, to: str, *, since: datetime
) -> list[datetime]:
    """Creation times of the number's recent verifications (index on account, mode, number)."""
    params = {
        "scope_account": scope.account_id,
        "scope_livemode": scope.livemode,
        "to": to,
        "since": since,
    }
    return _OPENED.execute(conn, params).scalars()


def prune(conn: Connection, *, counters_before: datetime, now: datetime) -> int:
    counters = conn.execute(delete(abuse_counters).where(C.bucket < counters_before))
    blocks = conn.execute(delete(destination_blocks).where(B.blocked_until <= now))
    return counters.rowcount + blocks.rowcount
