"""psycopg 3 (async) behind the same two calls as Relay's asyncpg layer, for bench/pg_drivers.py.

`read(statements)`: each statement on a pooled reader connection in autocommit,
one round trip each (a read's statements depend on one another). `write(segments)`:
one transaction on one of the writer connections. A segment is statements that
do not depend on each other's results: in pipeline mode they go in one flush,
then the client waits for their results, which decide what follows (the next
segment, then the COMMIT). The COMMIT itself waits for the last segment's
results, as a unit must see them before it may commit.

Modes:
- `plain`: no pipeline; every statement, BEGIN and COMMIT a round trip (as asyncpg).
- `unit`: pipeline; BEGIN and the first segment in one flush, each later segment in
  one, the COMMIT in one; a writer runs one unit at a time.
- `group`: as `unit`, and a writer takes every unit queued (up to 64) and sends
  each unit's COMMIT in the same flush as the next unit's BEGIN and first segment:
  one transaction per unit still, but one flush fewer per unit under load.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncPipeline, AsyncRawCursor

from relay.db.sql import Sql

Statement = tuple[Sql, tuple[Any, ...]]
Segment = list[Statement]
WRITERS = 4
READERS = 8
GROUP = 64


def returns_rows(statement: Sql) -> bool:
    text = statement.postgres
    return text.startswith(("SELECT", "WITH")) or " RETURNING " in text


async def connect(dsn: str) -> AsyncConnection[Any]:
    return await AsyncConnection.connect(dsn, autocommit=True, cursor_factory=AsyncRawCursor)


@dataclass
class Counts:
    """Flushes the client waited on (each a round trip), and units written."""

    flushes: int = 0


@dataclass
class _Queued:
    segments: list[Segment]
    future: asyncio.Future[None]


@dataclass
class PsycopgDb:
    dsn: str
    mode: str  # plain | unit | group
    counts: Counts = field(default_factory=Counts)
    _idle: list[AsyncConnection[Any]] = field(default_factory=list)
    _slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(READERS))
    _queue: asyncio.Queue[_Queued] = field(default_factory=asyncio.Queue)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _writers: list[AsyncConnection[Any]] = field(default_factory=list)

    async def open(self) -> None:
        self._writers = [await connect(self.dsn) for _ in range(WRITERS)]
        self._tasks = [asyncio.create_task(self._serve(conn)) for conn in self._writers]

    @contextlib.asynccontextmanager
    async def _reader(self) -> AsyncIterator[AsyncConnection[Any]]:
        async with self._slots:
            conn = self._idle.pop() if self._idle else await connect(self.dsn)
            try:
                yield conn
            finally:
                self._idle.append(conn)

    async def read(self, statements: Sequence[Statement]) -> None:
        async with self._reader() as conn:
            for statement, args in statements:
                cursor = conn.cursor()
                await cursor.execute(statement.postgres, args)
                self.counts.flushes += 1
                if returns_rows(statement):
                    await cursor.fetchall()

    async def write(self, segments: list[Segment]) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Queued(segments, future))
        await future

    async def _serve(self, conn: AsyncConnection[Any]) -> None:
        if self.mode == "plain":
            await self._take(conn, None)
        else:
            # In pipeline mode for good: leaving it costs a round trip of its own.
            async with conn.pipeline() as pipeline:
                await self._take(conn, pipeline)

    async def _take(self, conn: AsyncConnection[Any], pipeline: AsyncPipeline | None) -> None:
        most = GROUP if self.mode == "group" else 1
        while True:
            batch = [await self._queue.get()]
            while len(batch) < most and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                if pipeline is None:
                    for queued in batch:
                        await self._plain(conn, queued.segments)
                else:
                    await self._pipelined(conn, pipeline, batch)
            except Exception as error:
                with contextlib.suppress(Exception):
                    await conn.execute("ROLLBACK")
                    if pipeline is not None:
                        await pipeline.sync()
                for queued in batch:
                    if not queued.future.done():
                        queued.future.set_exception(error)
                continue
            _answer(batch)

    async def _plain(self, conn: AsyncConnection[Any], segments: list[Segment]) -> None:
        await conn.execute("BEGIN")
        for segment in segments:
            for statement, args in segment:
                cursor = await conn.execute(statement.postgres, args)
                self.counts.flushes += 1
                if returns_rows(statement):
                    await cursor.fetchall()
        await conn.execute("COMMIT")
        self.counts.flushes += 2

    async def _pipelined(
        self, conn: AsyncConnection[Any], pipeline: AsyncPipeline, batch: list[_Queued]
    ) -> None:
        """Answers each unit once the flush that carried its COMMIT has come back."""
        committing: list[_Queued] = []
        for queued in batch:
            for number, segment in enumerate(queued.segments):
                if number == 0:
                    await conn.execute("BEGIN")
                cursors = []
                for statement, args in segment:
                    cursor = conn.cursor()
                    await cursor.execute(statement.postgres, args)
                    cursors.append((statement, cursor))
                await pipeline.sync()
                self.counts.flushes += 1
                _answer(committing)
                for statement, cursor in cursors:
                    if returns_rows(statement):
                        await cursor.fetchall()
            await conn.execute("COMMIT")
            committing.append(queued)
            if self.mode == "unit":
                await pipeline.sync()
                self.counts.flushes += 1
                _answer(committing)
        if committing:
            await pipeline.sync()
            self.counts.flushes += 1
            _answer(committing)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for conn in [*self._writers, *self._idle]:
            with contextlib.suppress(psycopg.Error):
                await conn.close()


def _answer(committed: list[_Queued]) -> None:
    for queued in committed:
        if not queued.future.done():
            queued.future.set_result(None)
    committed.clear()
