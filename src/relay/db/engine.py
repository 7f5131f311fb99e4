"""Run a unit of work (a sync function over a Connection) in one transaction.

Domain stores are written once, as plain functions of a SQLAlchemy
`Connection`. How they run differs per database:

- SQLite: on the event loop's own thread, like any in-process library call. A
  transaction is a few hundred microseconds of CPU with no network wait, and
  handing it to a thread cost more than running it: each hop is a wake-up plus
  a GIL hand-over, and under load the GIL convoy made every statement wait for
  the loop (measured: create 12 req/s through a writer thread, 120 inline on
  the same VM; docs/benchmarks.md). The writer connection opens every write
  with BEGIN IMMEDIATE, so a transaction takes the write lock up front instead
  of failing with SQLITE_BUSY half-way; reads use a connection of their own.
  The price: while another process (a CLI command) holds the write lock, this
  process waits up to busy_timeout with its loop stopped.
- PostgreSQL: asyncpg through SQLAlchemy's async engine; the same function runs
  inside `run_sync`, without threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from relay.db.sqlite import WAL_BACKSTOP_PAGES, Checkpointer

T = TypeVar("T")
Work = Callable[[Connection], T]


class Database(Protocol):
    dialect: str

    async def write(self, work: Work[T]) -> T: ...

    async def read(self, work: Work[T]) -> T: ...

    async def close(self) -> None: ...


def sync_url(url: str) -> str:
    """The URL for synchronous tools (migrations, CLI) on either database."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    return url


def is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


def sqlite_engine(url: str, *, begin: str, checkpoints: bool = True) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
    pragmas = [
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "busy_timeout=30000",
        "foreign_keys=ON",
    ]
    if not checkpoints:
        pragmas.append(f"wal_autocheckpoint={WAL_BACKSTOP_PAGES}")

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's BEGIN below be the only transaction control.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in pragmas:
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    # BEGIN goes to the driver from the dialect's own hook rather than from a
    # "begin" event: any engine-level event listener makes SQLAlchemy dispatch
    # its (empty) execute events around every statement.
    def _do_begin(dbapi_connection: Any) -> None:
        dbapi_connection.execute(begin)

    engine.dialect.do_begin = _do_begin  # type: ignore[method-assign]
    return engine


class SqliteDatabase:
    dialect = "sqlite"

    def __init__(self, url: str) -> None:
        # A commit that crosses SQLite's auto-checkpoint threshold copies the WAL
        # into the database and syncs it before returning: every write queued
        # behind it waited, which was the 1 % of creates at 50 ms (p99) while
        # p95 stayed at 7 ms. The writer leaves checkpoints to a thread of their
        # own; PASSIVE checkpoints never block the writer or the readers.
        self._writer_engine = sqlite_engine(url, begin="BEGIN IMMEDIATE", checkpoints=False)
        self._reader_engine = sqlite_engine(url, begin="BEGIN")
        self._local = threading.local()
        path = make_url(url).database
        self._checkpointer = Checkpointer(path) if path else None

    def _connection(self, engine: Engine) -> Connection:
        key = f"conn_{id(engine)}"
        conn: Connection | None = getattr(self._local, key, None)
        if conn is None or conn.closed:
            conn = engine.connect()
            setattr(self._local, key, conn)
        return conn

    def _run(self, engine: Engine, work: Work[T]) -> T:
        conn = self._connection(engine)
        with conn.begin():
            return work(conn)

    async def write(self, work: Work[T]) -> T:
        return self._run(self._writer_engine, work)

    async def read(self, work: Work[T]) -> T:
        return self._run(self._reader_engine, work)

    @property
    def engines(self) -> tuple[Engine, ...]:
        """The engines behind this database, for instrumentation (query counts in tests)."""
        return (self._writer_engine, self._reader_engine)

    async def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._writer_engine.dispose()
        self._reader_engine.dispose()


class PostgresDatabase:
    dialect = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self._engine: AsyncEngine = create_async_engine(
            sync_url(url), pool_size=pool_size, max_overflow=0, pool_pre_ping=False
        )
        # Reads run without BEGIN and ROLLBACK: two round trips fewer on every
        # request (authentication is a read). Nothing is lost: under READ
        # COMMITTED, PostgreSQL's default, each statement of a transaction
        # takes its own snapshot anyway. Same pool, same connections.
        self._reader = self._engine.execution_options(isolation_level="AUTOCOMMIT")

    async def write(self, work: Work[T]) -> T:
        async with self._engine.begin() as conn:
            return await conn.run_sync(work)

    async def read(self, work: Work[T]) -> T:
        async with self._reader.connect() as conn:
            return await conn.run_sync(work)

    @property
    def engines(self) -> tuple[Engine, ...]:
        return (self._engine.sync_engine,)

    async def close(self) -> None:
        await self._engine.dispose()


def open_database(url: str) -> Database:
    if is_postgres(url):
        return PostgresDatabase(url)
    return SqliteDatabase(url)
