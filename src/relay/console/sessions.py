"""SQL for console sessions: one row per sign-in, found by the SHA-256 of its id.

A session answers while it is neither ended (signed out, or its key stopped
answering) nor past its expiry; every `relay serve` process reads the same row,
so signing out in one ends the session in all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from relay.db.sql import Sql, Tx, moment

_INSERT = Sql(
    "INSERT INTO console_sessions"
    " (id_hash, kind, account_id, livemode, key_id, created_at, expires_at)"
    " VALUES (:id_hash, :kind, :account, :livemode, :key_id, :now, :expires)"
)
_LIVE = Sql(
    "SELECT kind, account_id, livemode, key_id, expires_at FROM console_sessions"
    " WHERE id_hash = :id_hash AND ended_at IS NULL AND expires_at > :now"
)
_END = Sql(
    "UPDATE console_sessions SET ended_at = :now WHERE id_hash = :id_hash AND ended_at IS NULL"
)
# Ended sessions go with the rest at their expiry: until then the row costs one small line.
_PRUNE = Sql("DELETE FROM console_sessions WHERE expires_at <= :now")


@dataclass(frozen=True)
class StoredSession:
    kind: str
    account_id: str | None
    livemode: bool | None
    key_id: str | None
    expires_at: datetime


async def insert(tx: Tx, id_hash: str, session: StoredSession, *, now: datetime) -> None:
    await tx.execute(
        _INSERT,
        {
            "id_hash": id_hash,
            "kind": session.kind,
            "account": session.account_id,
            "livemode": session.livemode,
            "key_id": session.key_id,
            "now": now,
            "expires": session.expires_at,
        },
    )


async def live(tx: Tx, id_hash: str, *, now: datetime) -> StoredSession | None:
    """The session, unless it is unknown, ended or expired at `now`."""
    row = await tx.fetchrow(_LIVE, {"id_hash": id_hash, "now": now})
    if row is None:
        return None
    livemode = row["livemode"]
    return StoredSession(
        kind=row["kind"],
        account_id=row["account_id"],
        livemode=None if livemode is None else bool(livemode),
        key_id=row["key_id"],
        expires_at=moment(row["expires_at"]),
    )


async def end(tx: Tx, id_hash: str, *, now: datetime) -> bool:
    """Whether a session that was still open is now ended."""
    return await tx.execute(_END, {"id_hash": id_hash, "now": now}) > 0


async def prune(tx: Tx, *, now: datetime) -> int:
    return await tx.execute(_PRUNE, {"now": now})
