"""Group commit: one writer runs the units of work of concurrent requests in
one transaction, each under its own savepoint, and commits once.

A commit is most of a small write's cost (the WAL pages it writes, and on
PostgreSQL the flush it waits for), and the pages concurrent requests touch
are largely the same index leaves. Requests that arrive while a batch runs
queue up and form the next batch; under no load a batch is one unit and
costs no more than a transaction of its own (no savepoints then).

Guarantees, each tested:
- a unit is answered only after the COMMIT that made its writes durable;
  a process killed before that loses nothing it answered;
- a unit that raises is rolled back to its savepoint alone, gets its own
  error, and the rest of its batch commits;
- a failed COMMIT fails every unit of the batch (nothing was answered).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from relay.db.sql import MustRetry, Notices, Tx

T = TypeVar("T")
Unit = Callable[[Tx], Awaitable[T]]
log = logging.getLogger("relay.db")

# A deadlock victim (PostgreSQL) runs again, after its savepoint rolled back,
# this many times in all before its request gets the error.
RETRIES = 3
# Enough to amortise a commit many times over; small enough that one batch's
# row locks (PostgreSQL) and its wait for the loop (SQLite) stay short.
MAX_BATCH = 64


class Session(Protocol):
    """One connection's transaction control, for the writer."""

    @property
    def tx(self) -> Tx: ...

    def take_notified(self) -> Notices:
        """What the unit that just ran asked for after commit; forgets it."""
        ...

    async def begin(self) -> None: ...

    async def savepoint(self) -> None: ...

    async def release(self) -> None: ...

    async def rollback_to_savepoint(self) -> None: ...

    async def settle(self) -> None:
        """Write what the units held to the transaction's end (`relay.db.sums`)."""
        ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...


@dataclass
class _Queued:
    unit: Unit[Any]
    future: asyncio.Future[Any]


class GroupCommit:
    """Writers (one per connection) sharing one queue of units."""

    def __init__(self, sessions: list[Session], *, max_batch: int = MAX_BATCH) -> None:
        self._queue: asyncio.Queue[_Queued] = asyncio.Queue()
        self._max_batch = max_batch
        self._sessions = sessions
        self._tasks: list[asyncio.Task[None]] = []
        # Batches committed, for the benchmarks and tests that show batching.
        self.commits = 0
        self._listeners: dict[str, list[Callable[[], None]]] = {}

    def listen(self, channel: str, callback: Callable[[], None]) -> None:
        """Call `callback` after each commit of a batch in which a unit notified `channel`."""
        self._listeners.setdefault(channel, []).append(callback)

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._serve(session), name=f"relay-writer-{n}")
                for n, session in enumerate(self._sessions)
            ]

    async def run(self, unit: Unit[T]) -> T:
        """Run `unit` in the next batch; its result once that batch has committed."""
        self.start()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Queued(unit, future))
        return await future

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def announce(self, notices: Notices) -> None:
        """Wake the listeners and run the callbacks of units that have committed."""
        for channel in notices.channels:
            for callback in self._listeners.get(channel, ()):
                callback()
        for callback in notices.callbacks:
            try:
                callback()
            except Exception:
                # What ran after a commit cannot undo it, nor fail its units.
                log.exception("db.after_commit_failed")

    async def _serve(self, session: Session) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            # A request whose client went away before its turn is not run.
            batch = [queued for queued in batch if not queued.future.done()]
            if batch:
                await self._commit(session, batch)

    async def _commit(self, session: Session, batch: list[_Queued]) -> None:
        try:
            outcomes, notices = await _run_batch(session, batch)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await session.rollback()
            _fail_all(batch, DatabaseClosed())
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise
            # A unit that leaked a cancellation must not stop the writer.
            return
        except Exception as error:
            # BEGIN or COMMIT failed: nothing of this batch is durable.
            session.take_notified()
            with contextlib.suppress(Exception):
                await session.rollback()
            log.warning("db.batch_failed units=%d error=%s", len(batch), type(error).__name__)
            _fail_all(batch, error)
            return
        self.commits += 1
        self.announce(notices)
        for queued, (ok, value) in zip(batch, outcomes, strict=True):
            if queued.future.done():
                continue
            if ok:
                queued.future.set_result(value)
            else:
                queued.future.set_exception(value)


Outcome = tuple[bool, Any]


async def _run_batch(session: Session, batch: list[_Queued]) -> tuple[list[Outcome], Notices]:
    """Each unit's outcome, and what the committed units asked for after commit."""
    await session.begin()
    if len(batch) == 1:
        outcome = await _alone(session, batch[0].unit)
        notified = session.take_notified()
        return [outcome], notified if outcome[0] else Notices()
    outcomes: list[Outcome] = []
    notices = Notices()
    for queued in batch:
        outcome = await _in_savepoint(session, queued.unit)
        notified = session.take_notified()
        if outcome[0]:
            notices |= notified
        outcomes.append(outcome)
    # Failing, it fails the batch, as a failed COMMIT does.
    await session.settle()
    await session.commit()
    return outcomes, notices


async def _alone(session: Session, unit: Unit[Any]) -> Outcome:
    for tries_left in reversed(range(RETRIES)):
        try:
            value = await unit(session.tx)
            # Inside the unit's `try`: a deadlock there runs the unit again.
            await session.settle()
        except MustRetry as error:
            await session.rollback()
            session.take_notified()
            if not tries_left:
                return False, error
            await session.begin()
        except Exception as error:
            await session.rollback()
            return False, error
        else:
            await session.commit()
            return True, value
    raise AssertionError("unreachable")


async def _in_savepoint(session: Session, unit: Unit[Any]) -> Outcome:
    for tries_left in reversed(range(RETRIES)):
        await session.savepoint()
        try:
            value = await unit(session.tx)
        except MustRetry as error:
            await session.rollback_to_savepoint()
            session.take_notified()
            if not tries_left:
                return False, error
        except Exception as error:
            await session.rollback_to_savepoint()
            return False, error
        else:
            await session.release()
            return True, value
    raise AssertionError("unreachable")


def _fail_all(batch: list[_Queued], error: BaseException) -> None:
    for queued in batch:
        if not queued.future.done():
            queued.future.set_exception(error)


class Batched:
    """What both databases' handles share: writes through their GroupCommit."""

    _group: GroupCommit

    @property
    def commits(self) -> int:
        return self._group.commits

    async def write(self, unit: Unit[T]) -> T:
        return await self._group.run(unit)

    async def write_alone(self, unit: Unit[T]) -> T:
        """A unit that writes with one statement on this database, which is atomic on its
        own; where the database cannot make it one statement, a unit like any other."""
        return await self._group.run(unit)

    def listen(self, channel: str, callback: Callable[[], None]) -> None:
        self._group.listen(channel, callback)


class DatabaseClosed(Exception):
    """The writer stopped (shutdown) before this unit's batch committed."""
