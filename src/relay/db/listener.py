"""Changes to kept records on PostgreSQL: LISTEN on a connection of its own, and a
change's caller waiting until every listening process has dropped what it kept.

Each process that keeps records of a kind LISTENs on `relay_<kind>` from the first
time it asks whether they may be used (`fresh`), on a connection opened for that
alone. Until the LISTEN is in place, and from the moment the connection is lost
until it is back, `fresh` is False: nothing kept is used and every request reads,
so no change is ever missed. On each (re)connection what was kept is dropped.

A notification is handled on the event loop (asyncpg calls back there): what was
kept is dropped in that call. Only then does the listener say so, by naming the
generation it has heard in its connection's `application_name`
(`relay-keys 42`), which PostgreSQL shows in `pg_stat_activity` at once. The
process that made the change waits (`settled`) until no listening connection on
the database names a smaller generation, so the change returns only once every
process will refuse a revoked key at its next request. A process that stops
answering (its loop blocked, its host gone without closing the connection) is
waited for at most SETTLE_TIMEOUT; the change is committed all the same and a
warning names the process's backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from relay.db.changes import GENERATION, Callbacks, channel
from relay.db.group_commit import Unit
from relay.db.pg_connect import connect
from relay.db.sql import DatabaseUnavailable, Sql, Tx

log = logging.getLogger("relay.db")

# How long a change waits for every listening process before it returns anyway.
SETTLE_TIMEOUT = 2.0
# How long `start` waits for the listener before the process serves without it.
START_TIMEOUT = 2.0
# Between two tries at opening the listener: doubled from the first up to the last.
RECONNECT_DELAYS = (0.05, 2.0)
_POLL_DELAYS = (0.001, 0.05)

_SAY = Sql("SELECT set_config('application_name', :name, false)")


def application_name(kind: str, generation: int) -> str:
    return f"relay-{kind} {generation}"


# Listening connections of this database that have not said they heard `generation`.
# The CASE keeps the cast away from every other client's application_name.
_BEHIND = Sql(
    "SELECT pid, host(client_addr) AS client FROM pg_stat_activity"
    " WHERE datname = current_database()"
    " AND CASE WHEN application_name ~ :pattern"
    " THEN split_part(application_name, ' ', 2)::bigint END < :generation"
)


class PostgresChanges(Callbacks):
    """`read` runs a unit on one of the database's readers (the wait's polls); `tx`
    makes the Tx a statement runs in on a connection."""

    def __init__(
        self,
        kind: str,
        dsn: str,
        *,
        read: Callable[[Unit[Any]], Awaitable[Any]],
        tx: Callable[[Any], Tx],
    ) -> None:
        self._kind = kind
        self._dsn = dsn
        self._read = read
        self._tx = tx
        super().__init__()
        self._task: asyncio.Task[None] | None = None
        self._up = False
        self._closed = False
        # The newest generation notified, and a wake-up for the task that says so.
        self._heard = 0
        self._wake = asyncio.Event()
        self._listening = asyncio.Event()
        # Whether the log last said the listener was down: its return is said once.
        self._said_down = False

    async def start(self) -> bool:
        if not self.fresh():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._listening.wait(), START_TIMEOUT)
        return self._up

    def fresh(self) -> bool:
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(
                self._listen(), name=f"relay-listen-{self._kind}"
            )
        return self._up

    async def settled(self, generation: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_TIMEOUT
        delay, longest = _POLL_DELAYS
        params = {"pattern": f"^relay-{self._kind} [0-9]+$", "generation": generation}
        while True:
            try:
                behind = await self._read(lambda tx: tx.fetch(_BEHIND, params))
            except DatabaseUnavailable as error:
                # Committed all the same: a process that cannot be asked cannot listen either.
                self._unconfirmed(generation, f"database unavailable ({error})")
                return
            if not behind:
                return
            if loop.time() >= deadline:
                self._unconfirmed(
                    generation,
                    ", ".join(_backend(row["pid"], row["client"]) for row in behind),
                )
                return
            await asyncio.sleep(delay)
            delay = min(2 * delay, longest)

    def _unconfirmed(self, generation: int, processes: str) -> None:
        log.warning(
            "changes.unconfirmed kind=%s generation=%d processes=%s",
            self._kind,
            generation,
            processes,
        )

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._callbacks.clear()

    async def _listen(self) -> None:
        delay, longest = RECONNECT_DELAYS
        while True:
            try:
                await self._listen_once()
            except Exception as error:
                # Refused, unreachable, cut: every request reads meanwhile, as before.
                if not self._said_down:
                    log.warning(
                        "changes.listener_down kind=%s error=%s: every request reads its"
                        " records until it is back",
                        self._kind,
                        type(error).__name__,
                    )
                    self._said_down = True
            else:
                log.warning(
                    "changes.listener_lost kind=%s: every request reads its records until"
                    " it is back",
                    self._kind,
                )
                self._said_down = True
                delay = RECONNECT_DELAYS[0]
            await asyncio.sleep(delay)
            delay = min(2 * delay, longest)

    async def _listen_once(self) -> None:
        connection = await connect(
            self._dsn,
            server_settings={"application_name": application_name(self._kind, 0)},
        )
        lost = asyncio.Event()

        def on_lost(_: object) -> None:
            lost.set()
            self._wake.set()

        connection.add_termination_listener(on_lost)
        try:
            await connection.add_listener(channel(self._kind), self._notified)
            tx = self._tx(connection)
            row = await tx.fetchrow(GENERATION, {"name": self._kind})
            # Notified before the LISTEN took effect, or while nobody listened.
            self.changed()
            self._heard = max(self._heard, 0 if row is None else int(row["generation"]))
            self._up = True
            self._listening.set()
            if self._said_down:
                log.warning("changes.listener_up kind=%s: records are kept again", self._kind)
                self._said_down = False
            said = -1
            while not lost.is_set():
                if said < self._heard:
                    said = self._heard
                    await tx.execute(_SAY, {"name": application_name(self._kind, said)})
                    continue
                self._wake.clear()
                await self._wake.wait()
        finally:
            self._up = False
            self._listening.clear()
            self.changed()
            connection.terminate()

    def _notified(self, _connection: object, _pid: int, _channel: str, payload: str) -> None:
        # Dropped here, before the generation is said to be heard.
        self.changed()
        with contextlib.suppress(ValueError):
            self._heard = max(self._heard, int(payload))
        self._wake.set()


def _backend(pid: int, client: str | None) -> str:
    """A backend as the log names it: its pid, and its client's address when shown."""
    return f"{pid}@{client}" if client else str(pid)
