"""Changes to records that processes keep in memory, heard by every process.

A process keeps what it read of some records (the API keys it authenticated:
`relay.accounts.key_cache`) and must stop using them the moment one changes,
whichever process changed it. Every such change runs `bump` in its own unit:
the kind's counter in `cache_generations` goes up by one in the same
transaction, and its commit tells

- this process at once (`Tx.notify`, before the unit's caller is answered);
- other processes on SQLite through `PRAGMA data_version`, which moves for a
  connection when ANOTHER connection committed. Asked of the writer
  connection, it stays still under the process's own writes, so a request
  asks it (no I/O: the WAL index in shared memory) and reads the counter only
  when it moved (`relay.db.sqlite.SqliteChanges`);
- other processes on PostgreSQL through NOTIFY on `relay_<kind>`, heard on a
  connection of their own; while it is down nothing kept is used. The change's
  caller waits until every listening process has said it dropped what it kept
  (`relay.db.listener`), so a client that waited for the change to return finds
  it in every process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from relay.db.sql import Sql, Tx

KEYS = "keys"

_BUMP = Sql(
    "UPDATE cache_generations SET generation = generation + 1 WHERE name = :name"
    " RETURNING generation",
    postgres=(
        "WITH bumped AS (UPDATE cache_generations SET generation = generation + 1"
        " WHERE name = :name RETURNING name, generation)"
        " SELECT generation, pg_notify('relay_' || name, generation::text) FROM bumped"
    ),
)
GENERATION = Sql("SELECT generation FROM cache_generations WHERE name = :name")


def channel(kind: str) -> str:
    """The PostgreSQL channel a kind's changes are notified on."""
    return f"relay_{kind}"


def local_channel(kind: str) -> str:
    """What a unit notifies in its own process (`Tx.notify`)."""
    return f"changes:{kind}"


async def bump(tx: Tx, kind: str) -> int:
    """A change to a record of `kind` that processes may keep, in this unit; the kind's
    generation once it commits."""
    row = await tx.fetchrow(_BUMP, {"name": kind})
    if row is None:
        raise LookupError(f"cache_generations has no row {kind!r}: migrate the database")
    tx.notify(local_channel(kind))
    return int(row["generation"])


class Callbacks:
    """Who is told of a change (`Changes.on_change`), told in the order they asked."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], None]] = []

    def on_change(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def changed(self) -> None:
        for callback in self._callbacks:
            callback()


class Changes(Protocol):
    """What one process hears of changes to one kind of kept record."""

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback`, on the event loop, whenever a record may have changed: a
        change committed by any process, or this process's listener lost or regained."""
        ...

    async def start(self) -> bool:
        """Begin hearing changes (PostgreSQL: open the listener); whether they are heard
        once it returns, after at most a bounded wait (the listener keeps trying)."""
        ...

    def fresh(self) -> bool:
        """Whether records kept since the last callback may be used now. SQLite: always,
        once a change committed elsewhere has been heard (the callbacks ran first);
        PostgreSQL: while its listener is up (asking starts it)."""
        ...

    async def settled(self, generation: int) -> None:
        """Return once every process that keeps records of this kind has dropped what it
        kept before `generation`, or a bounded wait has passed (logged)."""
        ...

    async def close(self) -> None: ...
