"""SQLite through the standard library's sqlite3, on the event loop's own thread.

A statement is tens of microseconds of CPU with no network wait; handing it
to a thread costs more than running it (a wake-up and a GIL hand-over per
hop). The writer connection opens each batch with BEGIN IMMEDIATE, so a
transaction takes the write lock up front instead of failing with
SQLITE_BUSY half-way; reads use a connection of their own, which WAL lets
run beside the writer. The price: while another process (a CLI command)
holds the write lock, this process waits up to the busy timeout with its
loop stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from relay.db.changes import GENERATION, Callbacks, Changes, local_channel
from relay.db.group_commit import MAX_BATCH, Batched, GroupCommit, T, Unit
from relay.db.sql import (
    Channels,
    DatabaseUnavailable,
    Dialect,
    IntegrityViolation,
    Notices,
    Params,
    Row,
    Sql,
    Trace,
)
from relay.db.sums import HeldSums
from relay.private_files import create_private

BUSY_TIMEOUT_MS = 30_000
CHECKPOINT_INTERVAL = 1.0
# The writer's own commits checkpoint only past this many WAL pages, as a
# backstop: a commit that crosses the threshold copies the WAL into the
# database and syncs both on the event loop, and every request waits. The
# Checkpointer keeps the WAL shorter than that (see there).
WAL_BACKSTOP_PAGES = 20_000
# A WAL this long (40 MB) is started over from its first page. Each restart
# holds this process's writes for two disk syncs, so not more often than the
# WAL's length calls for.
RESTART_PAGES = 10_000
# How long a RESTART checkpoint waits for readers (or another process's
# write) before it settles for what a PASSIVE one does: the writes of this
# process wait that long at most.
RESTART_TIMEOUT = 0.2


# sqlite3 binds None only after looking for an adapter by three lookups, the costliest
# part of binding it; one registered for None is found by the first. `{}.get` of one
# argument answers None (NULL), as a C call.
_NOTHING: dict[None, None] = {}
_NULL: Callable[[None], None] = _NOTHING.get
sqlite3.register_adapter(type(None), _NULL)


def create_file(path: str) -> None:
    """The database file, made with mode 0600 before SQLite opens it. SQLite gives the
    -wal and -shm files it makes beside it the main file's mode, so they are private too."""
    if path and path != ":memory:" and not path.startswith("file:"):
        create_private(Path(path))


def connect(path: str) -> sqlite3.Connection:
    create_file(path)
    connection = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
    )
    connection.row_factory = sqlite3.Row
    for pragma in (
        "journal_mode=WAL",
        "synchronous=NORMAL",
        f"busy_timeout={BUSY_TIMEOUT_MS}",
        "foreign_keys=ON",
    ):
        connection.execute(f"PRAGMA {pragma}")
    return connection


# sqlite3's errors that become the data layer's (`_translation`). Caught by `try`, which
# costs nothing until one is raised; a context manager costs two calls per statement.
_TRANSLATED = (sqlite3.IntegrityError, sqlite3.OperationalError)


def _translation(error: sqlite3.Error) -> Exception:
    """The data layer's error for one of sqlite3's `_TRANSLATED`."""
    if isinstance(error, sqlite3.IntegrityError):
        return IntegrityViolation(str(error))
    # Locked past the busy timeout, disk full, read-only file: nothing was written.
    return DatabaseUnavailable(str(error))


class SqliteTx(Channels):
    dialect: Dialect = "sqlite"

    def __init__(self, connection: sqlite3.Connection, trace: Trace | None = None) -> None:
        super().__init__(trace)
        self.connection = connection
        # One cursor for every statement: `connection.execute` makes a cursor each time
        # (and registers it with the connection). Each method reads its statement's rows
        # out before it returns, with no await in between, so none is left half-read.
        self.cursor = connection.cursor()

    async def execute(self, statement: Sql, params: Params | None = None) -> int:
        args = self.bound(statement, params)
        try:
            cursor = self.cursor.execute(statement.sqlite, args)
        except _TRANSLATED as error:
            raise _translation(error) from error
        return cursor.rowcount

    async def executemany(self, statement: Sql, rows: Sequence[Params]) -> None:
        if len(rows) == 1:
            # sqlite3's executemany walks an iterator of rows: for one row, execute's cheaper.
            args = self.bound(statement, rows[0])
            try:
                self.cursor.execute(statement.sqlite, args)
            except _TRANSLATED as error:
                raise _translation(error) from error
            return
        many = self.bound_rows(statement, rows)
        try:
            self.cursor.executemany(statement.sqlite, many)
        except _TRANSLATED as error:
            raise _translation(error) from error

    async def fetch(self, statement: Sql, params: Params | None = None) -> list[Row]:
        args = self.bound(statement, params)
        try:
            rows: list[Row] = self.cursor.execute(statement.sqlite, args).fetchall()
        except _TRANSLATED as error:
            raise _translation(error) from error
        return _by_name(statement, rows) if statement.wide and rows else rows

    async def fetchrow(self, statement: Sql, params: Params | None = None) -> Row | None:
        args = self.bound(statement, params)
        try:
            cursor = self.cursor.execute(statement.sqlite, args)
            row: Row | None = cursor.fetchone()
            # A RETURNING statement finishes only when its rows are read out.
            cursor.fetchall()
        except _TRANSLATED as error:
            raise _translation(error) from error
        return _by_name(statement, [row])[0] if statement.wide and row is not None else row


def _by_name(statement: Sql, rows: list[Any]) -> list[Row]:
    """sqlite3's rows as dicts by column name (see `Sql.wide`): a statement's names are
    the same on every run, and as many as its rows' columns."""
    names = statement.columns
    if names is None:
        names = statement.columns = rows[0].keys()
    # No `strict=`: a keyword costs zip a dict per row, and the lengths agree (above).
    return [dict(zip(names, row)) for row in rows]  # noqa: B905


class SqliteSession:
    """Transaction control of the writer connection."""

    def __init__(self, connection: sqlite3.Connection, checkpointer: Checkpointer) -> None:
        self.connection = connection
        self.tx = SqliteTx(connection)
        self.tx.sums = self._sums = HeldSums()
        self._checkpointer = checkpointer

    def take_notified(self) -> Notices:
        return self.tx.take_notified()

    def _run(self, sql: str) -> None:
        try:
            self.tx.cursor.execute(sql)
        except _TRANSLATED as error:
            raise _translation(error) from error

    async def begin(self) -> None:
        if self._checkpointer.restart_due:
            # Between two batches this process writes nothing: the only moment
            # the WAL can be copied to its end. The loop serves on meanwhile.
            await asyncio.to_thread(self._checkpointer.restart)
        self._run("BEGIN IMMEDIATE")

    async def savepoint(self) -> None:
        self._run("SAVEPOINT unit")

    async def release(self) -> None:
        self._run("RELEASE unit")
        self._sums.keep_unit()

    async def rollback_to_savepoint(self) -> None:
        self._sums.drop_unit()
        self._run("ROLLBACK TO unit")
        self._run("RELEASE unit")

    async def settle(self) -> None:
        await self.tx.write_held()

    async def commit(self) -> None:
        self._run("COMMIT")

    async def rollback(self) -> None:
        self._sums.drop()
        if self.connection.in_transaction:
            self._run("ROLLBACK")


class SqliteDb(Batched):
    dialect: Dialect = "sqlite"

    def __init__(self, path: str, *, max_batch: int = MAX_BATCH) -> None:
        self.path = path
        self._writer = connect(path)
        self._writer.execute(f"PRAGMA wal_autocheckpoint={WAL_BACKSTOP_PAGES}")
        self._reader = SqliteTx(connect(path))
        self._checkpointer = Checkpointer(path)
        self._session = SqliteSession(self._writer, self._checkpointer)
        self._group = GroupCommit([self._session], max_batch=max_batch)
        self._changes: dict[str, SqliteChanges] = {}

    def changes(self, kind: str) -> Changes:
        found = self._changes.get(kind)
        if found is None:
            found = self._changes[kind] = SqliteChanges(kind, self._writer, self._reader)
            self._group.listen(local_channel(kind), found.changed)
        return found

    def trace(self, trace: Trace | None) -> None:
        self._reader.trace = self._session.tx.trace = trace

    async def read(self, unit: Unit[T]) -> T:
        """Each statement sees the latest commit (no snapshot across statements)."""
        return await unit(self._reader)

    async def snapshot(self, unit: Unit[T]) -> T:
        """Every statement of `unit` sees the same committed state."""
        reader = self._reader.connection
        if reader.in_transaction:
            return await unit(self._reader)
        reader.execute("BEGIN")
        try:
            return await unit(self._reader)
        finally:
            reader.execute("COMMIT")

    async def close(self) -> None:
        for changes in self._changes.values():
            await changes.close()
        await self._group.close()
        self._checkpointer.stop()
        self._writer.close()
        self._reader.connection.close()


class SqliteChanges(Callbacks):
    """Changes to one kind of kept record, heard through the writer connection.

    `PRAGMA data_version` on a connection moves when another connection (another
    process, or this one's checkpointer) committed since it was last asked, and
    never for the connection's own commits. The writer makes every commit of this
    process, so under this process's own writes it stays still; it costs a read
    lock on the WAL index and no I/O. Only when it moved is the kind's counter
    read (one statement, on the reader, which sees only what is committed), and
    only when that moved is what was kept dropped. This process's own changes
    drop it at their commit (`changed`, through the unit's notify).
    """

    def __init__(self, kind: str, writer: sqlite3.Connection, reader: SqliteTx) -> None:
        self._kind = kind
        # A cursor of its own, with plain tuples: asked on every request.
        self._cursor = writer.cursor()
        self._cursor.row_factory = None
        self._reader = reader
        self._version: int | None = None
        self._generation: int | None = None
        super().__init__()

    async def start(self) -> bool:
        return self.fresh()

    def fresh(self) -> bool:
        try:
            (version,) = self._cursor.execute("PRAGMA data_version").fetchone()
            if version == self._version:
                return True
            # Asked before the counter: a commit in between moves the version again.
            args = self._reader.bound(GENERATION, {"name": self._kind})
            row = self._reader.connection.execute(GENERATION.sqlite, args).fetchone()
        except _TRANSLATED as error:
            raise _translation(error) from error
        self._version = version
        generation = None if row is None else int(row["generation"])
        if generation != self._generation or generation is None:
            self._generation = generation
            self.changed()
        return True

    async def settled(self, generation: int) -> None:
        """Every process asks at its next request: nothing to wait for."""

    async def close(self) -> None:
        self._callbacks.clear()


class Checkpointer:
    """PASSIVE WAL checkpoints on a thread of their own, off the writer's path,
    and a RESTART one in the writer's turn when the WAL has grown long.

    A PASSIVE checkpoint never blocks the writer, and under steady writes it
    never catches up with it either: what is committed while it copies stays
    behind, so the WAL is never copied to its end, never starts over, and
    grows until the writer's backstop checkpoint runs inside a COMMIT on the
    event loop (docs/decisions/0005-sqlite-checkpoints.md). A RESTART checkpoint run
    while the writer waits copies the little the last PASSIVE one left, and
    the next commit writes the WAL from its start again.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        # Set by the checkpoint thread, read and cleared on the event loop.
        self.restart_due = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="relay-sqlite-checkpoint", daemon=True
        )
        if path != ":memory:":
            self._thread.start()

    def _loop(self) -> None:
        connection = sqlite3.connect(self._path, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            while not self._stop.wait(CHECKPOINT_INTERVAL):
                with contextlib.suppress(sqlite3.Error):
                    _, pages, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.restart_due = pages >= RESTART_PAGES
        finally:
            connection.close()

    def restart(self) -> None:
        """Copy the rest of the WAL and start it over; blocking, for a worker
        thread while this process's writer waits."""
        self.restart_due = False
        connection = sqlite3.connect(self._path, timeout=RESTART_TIMEOUT, isolation_level=None)
        try:
            with contextlib.suppress(sqlite3.Error):
                busy, _, _ = connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
                if not busy:
                    _write_first_frame(connection)
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def _write_first_frame(connection: sqlite3.Connection) -> None:
    """Commit a write that changes nothing, the first into the WAL just restarted.

    The first commit into a restarted WAL writes the WAL's header and syncs it:
    here, on the restart's thread, and not in the writer's next COMMIT, which
    runs on the event loop and holds up every request while the disk answers.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        connection.execute(f"PRAGMA user_version = {int(version)}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
