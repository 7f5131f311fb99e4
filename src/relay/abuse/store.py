"""SQL for abuse counters and destination blocks, run inside the caller's unit of work.

Counters change only through one `INSERT … ON CONFLICT DO UPDATE SET n = n + excluded.n`,
so concurrent requests in several processes add up instead of overwriting each other.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from relay.abuse.models import BUCKET, Bucket, Kind, Totals, bucket_of, step_of
from relay.accounts.models import Scope
from relay.db.sql import Row, Sql, Tx, moment
from relay.records import fast_init

# An enum made from its value is a Python call through EnumType; a dict is one lookup.
_KIND_OF: dict[str, Kind] = {member.value: member for member in Kind}

# Shards of each shared counter row: enough that concurrent sends rarely pick the same.
SHARDS = 8
_SCOPE = "account_id = :scope_account AND livemode = :scope_livemode"
_COUNTS = "bucket, sends, approvals, failed_checks"

_BUMP = Sql(
    "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, shard, sends,"
    " approvals, failed_checks) VALUES (:account_id, :livemode, :kind, :subject, :bucket,"
    " :shard, :sends, :approvals, :failed_checks)"
    " ON CONFLICT (account_id, livemode, kind, subject, bucket, shard) DO UPDATE SET"
    " sends = abuse_counters.sends + excluded.sends,"
    " approvals = abuse_counters.approvals + excluded.approvals,"
    " failed_checks = abuse_counters.failed_checks + excluded.failed_checks"
)
# What `_BUMP` adds to a row.
_ADDED = ("sends", "approvals", "failed_checks")
_WINDOW = Sql(
    f"SELECT {_COUNTS} FROM abuse_counters"
    f" WHERE {_SCOPE} AND kind = :kind AND subject = :subject AND bucket >= :since"
)

# Everything a send is decided on, in one round trip: the counters of its four
# windows (the number's over a day, its prefix's and its country's over an hour,
# the account's over a day), the blocks on its prefix and its country, and the
# number's own verifications that are pending or were opened within the hour
# (as many as the hourly cap looks at).
# One indexed SELECT per part, tagged and joined by UNION ALL: with the windows
# OR-ed in one WHERE, SQLite searched the primary key by account and mode only
# and read every counter the account had.
_WINDOWS = 4
_BLOCKS = 2
# Typed NULLs: PostgreSQL resolves a UNION's column types from the first parts on.
_NO_TEXT = "CAST(NULL AS text)"
_NO_TIME = "CAST(NULL AS timestamp with time zone)"
# Each window added up in SQL: a day's window is 288 buckets (times their shards), and
# only a refusal needs them one by one (to say when the cap lifts).
_COUNTER_PART = (
    f"SELECT 'counter' AS part, kind, subject, {_NO_TIME} AS at, {_NO_TIME} AS until,"
    " SUM(sends) AS sends, SUM(approvals) AS approvals, SUM(failed_checks) AS failed_checks,"
    f" {_NO_TEXT} AS id, {_NO_TEXT} AS status FROM abuse_counters WHERE {_SCOPE}"
    " AND kind = :kind_{i} AND subject = :subject_{i} AND bucket >= :since_{i}"
    " GROUP BY kind, subject"
)
_BLOCK_PART = (
    f"SELECT 'block', kind, subject, {_NO_TIME}, blocked_until, 0, 0, 0, {_NO_TEXT}, {_NO_TEXT}"
    f" FROM destination_blocks WHERE {_SCOPE} AND kind = :block_kind_{{i}}"
    " AND subject = :block_subject_{i}"
)
_NUMBER_COLUMNS = (
    f"'verification', {_NO_TEXT}, {_NO_TEXT}, created_at, expires_at, 0, 0, 0, id, status"
)
# The number's pending verification (its unique partial index), on any channel,
# then its newest closed ones that asked for `:channel` first (limits count per
# destination and channel), newest first by id (ids sort by creation), at most
# `:recent` of them, kept if opened since `:opened_since`. A number that integration suites reuse
# (the sandbox's) gathers verifications by the thousand: a condition on
# `created_at` alone would read every one of them on each send.
_NUMBER_PARTS = (
    f"SELECT {_NUMBER_COLUMNS} FROM verifications WHERE {_SCOPE} AND to_number = :to"
    " AND status = 'pending'",
    f"SELECT * FROM (SELECT {_NUMBER_COLUMNS} FROM verifications WHERE {_SCOPE}"
    " AND to_number = :to AND status <> 'pending'"
    # Not `LIKE :pattern`: SQLite prepares a statement again for each value bound to a
    # LIKE pattern, and this one is long; a prefix compared as a substring is prepared once.
    " AND (channels = :channel OR substr(channels, 1, :first_length) = :channel_first)"
    " ORDER BY id DESC LIMIT :recent) AS newest"
    " WHERE created_at > :opened_since",
)
# The account's own texts, for an account that has some (the key's lookup says so):
# channel and locale in `kind` and `subject`, the text in `id`. By the table's key.
_TEXT_PART = (
    f"SELECT 'text', channel, locale, {_NO_TIME}, {_NO_TIME}, 0, 0, 0, text, {_NO_TEXT}"
    f" FROM account_templates WHERE account_id = :scope_account"
)
_SEND_PARTS = [
    *(_COUNTER_PART.format(i=i) for i in range(_WINDOWS)),
    *(_BLOCK_PART.format(i=i) for i in range(_BLOCKS)),
    *_NUMBER_PARTS,
]
# The parameters' names of each window and block part, made once.
_WINDOW_KEYS = [(f"kind_{i}", f"subject_{i}", f"since_{i}") for i in range(_WINDOWS)]
_BLOCK_KEYS = [(f"block_kind_{i}", f"block_subject_{i}") for i in range(_BLOCKS)]
# A window without a counter row: one record for all (it is frozen).
_NO_SENDS = Totals()
# An enum's `.value` is a Python property.
_KIND_TEXT = {kind: kind.value for kind in Kind}
_STEP = {kind: step_of(kind) for kind in Kind}
_NUMBER_TEXT = Kind.NUMBER.value
_BEFORE_SEND = Sql(" UNION ALL ".join(_SEND_PARTS))
_BEFORE_SEND_WITH_TEXTS = Sql(" UNION ALL ".join([*_SEND_PARTS, _TEXT_PART]))


def failed_checks_of(number: str) -> str:
    """SQL for the wrong codes `number` (a column) had since `:failed_since`, in the
    request's scope, for a query that reads them with what they are about."""
    return (
        "(SELECT COALESCE(SUM(c.failed_checks), 0) FROM abuse_counters c"
        " WHERE c.account_id = :scope_account AND c.livemode = :scope_livemode"
        f" AND c.kind = '{Kind.NUMBER.value}' AND c.subject = {number}"
        " AND c.bucket >= :failed_since)"
    )


def failed_check_from(counted: str) -> str:
    """SQL adding one wrong code, in bucket `:bucket`, to the number counter of each row of
    `counted` (a CTE returning account_id, livemode and to_number), so that PostgreSQL
    writes it in the statement that counts the check. `add_failed_check`, as SQL."""
    return (
        "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, shard, sends,"
        f" approvals, failed_checks) SELECT account_id, livemode, '{Kind.NUMBER.value}',"
        f" to_number, CAST(:bucket AS timestamp with time zone), 0, 0, 0, 1 FROM {counted}"
        " ON CONFLICT (account_id, livemode, kind, subject, bucket, shard) DO UPDATE SET"
        " failed_checks = abuse_counters.failed_checks + excluded.failed_checks"
    )


_BLOCK = Sql(
    "INSERT INTO destination_blocks (account_id, livemode, kind, subject, blocked_until,"
    " created_at) VALUES (:scope_account, :scope_livemode, :kind, :subject, :until, :now)"
    " ON CONFLICT (account_id, livemode, kind, subject) DO UPDATE SET"
    " blocked_until = excluded.blocked_until, created_at = excluded.created_at"
)
_PRUNE_COUNTERS = Sql("DELETE FROM abuse_counters WHERE bucket < :before")
# Once no send writes a bucket any more, its shards hold one row's worth: added
# into shard 0, every window reads about a row per bucket. One statement, so a
# reader sees the shards or their sum, never both. PostgreSQL only: SQLite
# writes shard 0 alone (`bump_many`).
_FOLD_SHARDS = Sql(
    "WITH folded AS (DELETE FROM abuse_counters WHERE shard > 0"
    f" AND ((kind = '{Kind.ACCOUNT.value}' AND bucket < :account_closed)"
    f" OR (kind <> '{Kind.ACCOUNT.value}' AND bucket < :closed))"
    f" RETURNING account_id, livemode, kind, subject, {_COUNTS})"
    " INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, shard, sends,"
    " approvals, failed_checks) SELECT account_id, livemode, kind, subject, bucket, 0,"
    " SUM(sends), SUM(approvals), SUM(failed_checks) FROM folded"
    " GROUP BY account_id, livemode, kind, subject, bucket"
    " ON CONFLICT (account_id, livemode, kind, subject, bucket, shard) DO UPDATE SET"
    " sends = abuse_counters.sends + excluded.sends,"
    " approvals = abuse_counters.approvals + excluded.approvals,"
    " failed_checks = abuse_counters.failed_checks + excluded.failed_checks"
)
_PRUNE_BLOCKS = Sql("DELETE FROM destination_blocks WHERE blocked_until <= :now")

Window = tuple[Kind, str, datetime]


def _scope(scope: Scope) -> dict[str, Any]:
    return {"scope_account": scope.account_id, "scope_livemode": scope.livemode}


def _bucket(row: Row) -> Bucket:
    return Bucket(moment(row["bucket"]), row["sends"], row["approvals"], row["failed_checks"])


@fast_init
@dataclass(frozen=True)
class NumberVerification:
    """One of the number's verifications, as far as a send is concerned."""

    id: str
    pending: bool
    created_at: datetime
    expires_at: datetime


@dataclass
class SendContext:
    """What `before_send` read: each window's buckets, each block's end, the number's
    pending or recently opened verifications, and the account's own texts when asked."""

    counters: dict[tuple[Kind, str], Totals] = field(default_factory=dict)
    blocked: dict[tuple[Kind, str], datetime] = field(default_factory=dict)
    verifications: list[NumberVerification] = field(default_factory=list)
    # (channel, locale) -> text, as stored.
    texts: dict[tuple[str, str], str] = field(default_factory=dict)


async def before_send(
    tx: Tx,
    scope: Scope,
    to: str,
    windows: Sequence[Window],
    blocks: Sequence[tuple[Kind, str]],
    *,
    opened_since: datetime,
    recent: int,
    channel: str = "sms",
    texts: bool = False,
) -> SendContext:
    """Four distinct windows, two block subjects and the number's verifications, at once:
    its pending one, and of those opened since `opened_since` on `channel` first the
    newest `recent`; with `texts`, the account's own texts too."""
    if len(windows) != _WINDOWS or len(blocks) != _BLOCKS:
        raise ValueError(f"{_WINDOWS} windows and {_BLOCKS} block subjects")
    params = {
        **_scope(scope),
        "to": to,
        "opened_since": opened_since,
        "recent": recent,
        "channel": channel,
        "channel_first": f"{channel},",
        "first_length": len(channel) + 1,
    }
    for (kind_at, subject_at, since_at), (kind, subject, since) in zip(
        _WINDOW_KEYS, windows, strict=True
    ):
        params[kind_at] = _KIND_TEXT[kind]
        params[subject_at] = subject
        params[since_at] = since
    for (kind_at, subject_at), (kind, subject) in zip(_BLOCK_KEYS, blocks, strict=True):
        params[kind_at] = _KIND_TEXT[kind]
        params[subject_at] = subject
    found = SendContext(counters=dict.fromkeys([(k, s) for k, s, _ in windows], _NO_SENDS))
    for row in await tx.fetch(_BEFORE_SEND_WITH_TEXTS if texts else _BEFORE_SEND, params):
        part = row["part"]
        if part == "counter":
            found.counters[(_KIND_OF[row["kind"]], row["subject"])] = Totals(
                int(row["sends"]), int(row["approvals"]), int(row["failed_checks"])
            )
        elif part == "block":
            found.blocked[(_KIND_OF[row["kind"]], row["subject"])] = moment(row["until"])
        elif part == "text":
            found.texts[(row["kind"], row["subject"])] = row["id"]
        else:
            found.verifications.append(
                NumberVerification(
                    id=row["id"],
                    pending=row["status"] == "pending",
                    created_at=moment(row["at"]),
                    expires_at=moment(row["until"]),
                )
            )
    held = tx.held(_BUMP)
    if held:
        _add_held(found.counters, held, scope, windows)
    return found


def _add_held(
    counters: dict[tuple[Kind, str], Totals],
    held: list[dict[str, Any]],
    scope: Scope,
    windows: Sequence[Window],
) -> None:
    """Add to each window what the writer holds for it (`Tx.held`): the counts of this
    batch's earlier units, not yet written."""
    at = {(_KIND_TEXT[kind], subject): (kind, subject, since) for kind, subject, since in windows}
    for row in held:
        window = at.get((row["kind"], row["subject"]))
        if (
            window is None
            or row["bucket"] < window[2]
            or row["account_id"] != scope.account_id
            or row["livemode"] != scope.livemode
        ):
            continue
        kind, subject, _ = window
        read = counters[(kind, subject)]
        counters[(kind, subject)] = Totals(
            read.sends + row["sends"],
            read.approvals + row["approvals"],
            read.failed_checks + row["failed_checks"],
        )


def _held_of(
    held: list[dict[str, Any]], scope: Scope, kind: Kind, subject: str, since: datetime
) -> list[dict[str, Any]]:
    """The rows of one window among those the writer holds (`Tx.held`): the counts of
    this batch's earlier units, not yet written."""
    text = _KIND_TEXT[kind]
    return [
        row
        for row in held
        if row["subject"] == subject
        and row["kind"] == text
        and row["bucket"] >= since
        and row["account_id"] == scope.account_id
        and row["livemode"] == scope.livemode
    ]


async def bump_many(
    tx: Tx,
    scope: Scope,
    rows: Sequence[tuple[Kind, str, int, int, int]],
    *,
    at: datetime,
) -> None:
    """Add (kind, subject, sends, approvals, failed_checks) to several counters at once,
    each in its kind's bucket of the moment `at`."""
    # Shards spread PostgreSQL's row locks; SQLite has one writer and no row locks,
    # so there a shard only multiplies the rows every window adds up.
    shard = random.randrange(SHARDS) if tx.dialect == "postgresql" else 0
    # Held by the writer to its batch's end, summed with the batch's other units' (the
    # same few shared rows): `relay.db.sums`.
    account, livemode = scope.account_id, scope.livemode
    # A moment's bucket costs a hash of the moment to find (`bucket_of`): found once for
    # every kind counted in the common step.
    common = bucket_of(at, BUCKET)
    await tx.add_up(
        _BUMP,
        [
            {
                "account_id": account,
                "livemode": livemode,
                "kind": _KIND_TEXT[kind],
                "subject": subject,
                "bucket": common if _STEP[kind] is BUCKET else bucket_of(at, _STEP[kind]),
                # A number's row is its own; only rows every send shares are split.
                "shard": 0 if kind is Kind.NUMBER else shard,
                "sends": sends,
                "approvals": approvals,
                "failed_checks": failed_checks,
            }
            for kind, subject, sends, approvals, failed_checks in rows
        ],
        _ADDED,
    )


async def add_failed_check(tx: Tx, scope: Scope, number: str, *, at: datetime) -> None:
    """One wrong code against the number, written at once: its row is the number's own,
    which no other unit of a batch adds to, so holding it (`Tx.add_up`) sums nothing."""
    await tx.execute(
        _BUMP,
        {
            "account_id": scope.account_id,
            "livemode": scope.livemode,
            "kind": _NUMBER_TEXT,
            "subject": number,
            "bucket": bucket_of(at, _STEP[Kind.NUMBER]),
            "shard": 0,
            "sends": 0,
            "approvals": 0,
            "failed_checks": 1,
        },
    )


def failed_check_bucket(at: datetime) -> datetime:
    """The bucket `failed_check_from` counts a wrong code made at `at` in."""
    return bucket_of(at, step_of(Kind.NUMBER))


async def window(
    tx: Tx, scope: Scope, kind: Kind, subject: str, *, since: datetime
) -> list[Bucket]:
    params = {**_scope(scope), "kind": kind.value, "subject": subject, "since": since}
    buckets = [_bucket(row) for row in await tx.fetch(_WINDOW, params)]
    held = tx.held(_BUMP)
    mine = _held_of(held, scope, kind, subject, since) if held else []
    for row in mine:
        buckets.append(Bucket(row["bucket"], row["sends"], row["approvals"], row["failed_checks"]))
    return buckets


async def block(
    tx: Tx, scope: Scope, kind: Kind, subject: str, *, until: datetime, now: datetime
) -> None:
    params = {**_scope(scope), "kind": kind.value, "subject": subject, "until": until, "now": now}
    await tx.execute(_BLOCK, params)


async def prune(tx: Tx, *, counters_before: datetime, now: datetime) -> int:
    counters = await tx.execute(_PRUNE_COUNTERS, {"before": counters_before})
    blocks = await tx.execute(_PRUNE_BLOCKS, {"now": now})
    return counters + blocks


async def fold_shards(tx: Tx, *, closed: datetime, account_closed: datetime) -> None:
    """Add the shards of buckets older than `closed` (the account's: `account_closed`)
    into one row each."""
    if tx.dialect == "postgresql":
        await tx.execute(_FOLD_SHARDS, {"closed": closed, "account_closed": account_closed})
