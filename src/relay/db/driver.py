"""Open the database a URL names: SQLite (the default) or PostgreSQL.

Every runtime query goes through the object this returns: `write` runs a
unit of work in the next group-committed batch, `read` runs one outside any
transaction, `snapshot` runs one whose statements all see the same commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from relay.db import postgres
from relay.db.changes import Changes
from relay.db.group_commit import MAX_BATCH, T, Unit
from relay.db.postgres import PostgresDb
from relay.db.sql import Dialect, Trace
from relay.db.sqlite import SqliteDb
from relay.db.urls import is_postgres, postgres_dsn, sqlite_path


class Db(Protocol):
    dialect: Dialect

    async def write(self, unit: Unit[T]) -> T: ...

    async def write_alone(self, unit: Unit[T]) -> T:
        """A unit whose writes are one statement: PostgreSQL commits it on its own, outside
        the writers; SQLite runs it in the writer's next batch."""
        ...

    async def read(self, unit: Unit[T]) -> T: ...

    async def snapshot(self, unit: Unit[T]) -> T: ...

    async def close(self) -> None: ...

    def listen(self, channel: str, callback: Callable[[], None]) -> None:
        """Call `callback` after every commit of a unit that notified `channel`."""
        ...

    def changes(self, kind: str) -> Changes:
        """How this process hears of changes to records of `kind` it keeps
        (`relay.db.changes`); the same object for every call."""
        ...

    def trace(self, trace: Trace | None) -> None:
        """Report every statement run from now on (statement counts in tests and benches)."""
        ...

    @property
    def commits(self) -> int:
        """Batches committed so far."""
        ...


def open_db(url: str, *, max_batch: int | None = None) -> Db:
    """`max_batch`: units per transaction at most (default: each database's own)."""
    if is_postgres(url):
        return PostgresDb(postgres_dsn(url), max_batch=max_batch or postgres.BATCH)
    return SqliteDb(sqlite_path(url), max_batch=max_batch or MAX_BATCH)
