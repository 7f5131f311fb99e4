"""PostgreSQL through asyncpg: reads on a pool in autocommit, writes through
a few writer connections that each commit batches of units (group commit).

Reads run without BEGIN and COMMIT: under READ COMMITTED, PostgreSQL's
default, each statement takes its own snapshot anyway, and the two round
trips saved are most of a small read's wait. A writer connection that
breaks (the server restarted) is opened again for its next batch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import asyncpg

from relay.db.changes import Changes, local_channel
from relay.db.group_commit import RETRIES, Batched, GroupCommit, T, Unit
from relay.db.listener import PostgresChanges
from relay.db.pg_connect import connect
from relay.db.sql import (
    Channels,
    DatabaseUnavailable,
    Dialect,
    IntegrityViolation,
    MustRetry,
    Notices,
    Params,
    Row,
    Sql,
    Trace,
)
from relay.db.sums import HeldSums

# A transaction per unit, over a few writers. Batching many units into one
# transaction, as on SQLite, held every batch's row locks for the whole batch:
# every send upserts its account's daily counter row, so batches queued behind
# one another across processes, and deadlocked. PostgreSQL already merges the
# WAL flushes of concurrent commits. Four writers per process, not more: on a
# small machine every extra backend competes for the same cores. The figures
# behind both choices are in docs/benchmarks.md.
WRITERS = 4
BATCH = 1
READERS = 8
_UNAVAILABLE = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
)


@contextlib.contextmanager
def _translated(connection: Any = None) -> Iterator[None]:
    try:
        yield
    except asyncpg.IntegrityConstraintViolationError as error:
        raise IntegrityViolation(str(error)) from error
    except (asyncpg.DeadlockDetectedError, asyncpg.SerializationError) as error:
        raise MustRetry(str(error)) from error
    except _UNAVAILABLE as error:
        raise DatabaseUnavailable(str(error)) from error
    except asyncpg.InternalClientError as error:
        # A connection the server cut while shutting down can fail its next statement
        # this way ("cannot switch to state") rather than as a lost connection; around
        # the pool (no connection of ours yet) it can only be that.
        if connection is None or connection.is_closed():
            raise DatabaseUnavailable(str(error)) from error
        raise


class PostgresTx(Channels):
    dialect: Dialect = "postgresql"

    def __init__(self, connection: Any, trace: Trace | None = None) -> None:
        super().__init__(trace)
        self.connection = connection

    async def execute(self, statement: Sql, params: Params | None = None) -> int:
        args = self.bound(statement, params)
        with _translated(self.connection):
            status: str = await self.connection.execute(statement.postgres, *args)
        count = status.rpartition(" ")[2]
        return int(count) if count.isdigit() else 0

    async def executemany(self, statement: Sql, rows: Sequence[Params]) -> None:
        many = self.bound_rows(statement, rows)
        with _translated(self.connection):
            await self.connection.executemany(statement.postgres, many)

    async def fetch(self, statement: Sql, params: Params | None = None) -> list[Row]:
        args = self.bound(statement, params)
        with _translated(self.connection):
            rows: list[Row] = await self.connection.fetch(statement.postgres, *args)
        return rows

    async def fetchrow(self, statement: Sql, params: Params | None = None) -> Row | None:
        args = self.bound(statement, params)
        with _translated(self.connection):
            row: Row | None = await self.connection.fetchrow(statement.postgres, *args)
        return row


class _Alone(PostgresTx):
    """A unit committed by its one statement (autocommit): a second statement would
    commit apart from the first, so it is refused before it runs."""

    ran = False

    def traced(self, statement: Sql, params: Params | None) -> Sql:
        if self.ran:
            raise RuntimeError(f"a unit run alone has one statement; {statement!r} is a second")
        self.ran = True
        return super().traced(statement, params)

    def bound_rows(self, statement: Sql, rows: Sequence[Params]) -> list[tuple[Any, ...]]:
        if len(rows) > 1:
            raise RuntimeError(f"a unit run alone has one statement; {statement!r} runs many")
        return super().bound_rows(statement, rows)


class PostgresSession:
    """One writer connection, opened on first use and again after it broke."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._connection: Any = None
        self.tx = PostgresTx(None)
        self.tx.sums = self._sums = HeldSums()

    def take_notified(self) -> Notices:
        return self.tx.take_notified()

    async def _run(self, sql: str) -> None:
        with _translated(self.tx.connection):
            await self.tx.connection.execute(sql)

    async def begin(self) -> None:
        if self._connection is None or self._connection.is_closed():
            with _translated():
                self._connection = await connect(self._dsn)
            self.tx.connection = self._connection
        await self._run("BEGIN")

    async def savepoint(self) -> None:
        await self._run("SAVEPOINT unit")

    async def release(self) -> None:
        await self._run("RELEASE SAVEPOINT unit")
        self._sums.keep_unit()

    async def rollback_to_savepoint(self) -> None:
        self._sums.drop_unit()
        await self._run("ROLLBACK TO SAVEPOINT unit")
        await self._run("RELEASE SAVEPOINT unit")

    async def settle(self) -> None:
        await self.tx.write_held()

    async def commit(self) -> None:
        await self._run("COMMIT")

    async def rollback(self) -> None:
        self._sums.drop()
        connection = self._connection
        if connection is not None and not connection.is_closed() and connection.is_in_transaction():
            await self._run("ROLLBACK")

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()


class Readers:
    """The connections reads and units run alone use, up to `size` at once.

    Not asyncpg's pool: its acquire and release (a timer per release, a task to
    shield each release, the reset hook) cost more CPU than the statement they
    carry (docs/decisions/0011-reads-before-writes-on-postgresql.md). A reader
    only runs statements in autocommit, or a read-only transaction its context
    closes; it sets, listens and locks nothing, so it goes back as it is. One
    whose use was interrupted (cancelled, or the server went away) may be
    mid-statement and is dropped.
    """

    def __init__(self, dsn: str, size: int) -> None:
        self._dsn = dsn
        self._idle: list[Any] = []
        self._slots = asyncio.Semaphore(size)
        self._closed = False

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        async with self._slots:
            connection = self._idle.pop() if self._idle else None
            if connection is None or connection.is_closed():
                with _translated():
                    connection = await connect(self._dsn)
            try:
                with _translated(connection):
                    yield connection
            except DatabaseUnavailable:
                connection.terminate()
                raise
            except Exception:
                if connection.is_closed() or connection.is_in_transaction():
                    connection.terminate()
                else:
                    self._give_back(connection)
                raise
            except BaseException:
                connection.terminate()
                raise
            self._give_back(connection)

    def _give_back(self, connection: Any) -> None:
        if self._closed:
            connection.terminate()
        else:
            self._idle.append(connection)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.close()


class PostgresDb(Batched):
    dialect: Dialect = "postgresql"

    def __init__(
        self,
        dsn: str,
        *,
        writers: int = WRITERS,
        readers: int = READERS,
        max_batch: int = BATCH,
    ) -> None:
        self._dsn = dsn
        self._readers = Readers(dsn, readers)
        self._trace: Trace | None = None
        self._sessions = [PostgresSession(self._dsn) for _ in range(writers)]
        self._group = GroupCommit(list(self._sessions), max_batch=max_batch)
        self._changes: dict[str, PostgresChanges] = {}

    def changes(self, kind: str) -> Changes:
        found = self._changes.get(kind)
        if found is None:
            found = PostgresChanges(kind, self._dsn, read=self.read, tx=PostgresTx)
            self._changes[kind] = found
            self._group.listen(local_channel(kind), found.changed)
        return found

    def trace(self, trace: Trace | None) -> None:
        self._trace = trace
        for session in self._sessions:
            session.tx.trace = trace

    async def read(self, unit: Unit[T]) -> T:
        async with self._acquired() as connection:
            return await unit(PostgresTx(connection, self._trace))

    async def write_alone(self, unit: Unit[T]) -> T:
        """The unit's one statement in autocommit on a pooled connection: no BEGIN nor
        COMMIT round trip, and no writer held while the statement waits for a row lock."""
        for tries_left in reversed(range(RETRIES)):
            try:
                async with self._acquired() as connection:
                    tx = _Alone(connection, self._trace)
                    value = await unit(tx)
            except MustRetry:
                if not tries_left:
                    raise
            else:
                self._group.announce(tx.take_notified())
                return value
        raise AssertionError("unreachable")

    async def snapshot(self, unit: Unit[T]) -> T:
        async with (
            self._acquired() as connection,
            connection.transaction(isolation="repeatable_read", readonly=True),
        ):
            return await unit(PostgresTx(connection, self._trace))

    def _acquired(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self._readers.acquire()

    async def close(self) -> None:
        for changes in self._changes.values():
            await changes.close()
        await self._group.close()
        for session in self._sessions:
            with contextlib.suppress(Exception):
                await session.close()
        await self._readers.close()
