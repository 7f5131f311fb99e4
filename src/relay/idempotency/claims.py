"""Keys taken in the unit of work that makes their request's change, with its answer.

The idempotency middleware leaves a `Pending` claim in a context variable for a
request under an Idempotency-Key, without reading anything; the web layer gives
it `render`, how the request's answer is made from what its service returns. The
service whose unit of work makes the change decides everything first, then takes
the key before any other write (`Pending.take`), with the answer rendered: the
change, the key and the answer it replays commit together or not at all.

A unit that finds the key held raises `KeyTaken` with the record it found, so it
writes nothing (its savepoint rolls back) and the middleware answers from that
record: a replay, 409 while the holder runs, 422 for another request. A process
killed after its change committed leaves a key that says which resource it changed
(and, when the unit knew it, the answer), so the retry never runs again: no
second SMS.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relay.accounts.models import Scope
from relay.db.sql import Tx
from relay.idempotency import store
from relay.idempotency.models import KEEP, KeyRecord, StoredResponse, is_stale

# The request's answer as the client gets it, from what its service returned and the
# moment it is shown at.
Render = Callable[[Any, datetime], StoredResponse]


class KeyTaken(Exception):
    """Raised in a unit of work whose key a live record holds (another request's, or this
    request's first try): the unit writes nothing, and `record` decides the answer."""

    def __init__(self, record: KeyRecord | None) -> None:
        super().__init__("the Idempotency-Key is taken")
        self.record = record


@dataclass
class Pending:
    """A request under an Idempotency-Key that may run. `locked_until` is its token."""

    scope: Scope
    key: str
    request_hash: str
    locked_until: datetime
    # How the web layer makes the answer; None: the key is taken without it.
    render: Render | None = None
    # Set once a unit that took the key has committed.
    took: bool = False
    # The answer committed with the key, byte for byte what the client must get.
    kept: StoredResponse | None = None

    async def take(
        self, tx: Tx, *, resource_path: str, result: object | None, now: datetime
    ) -> None:
        """Take the key with this unit's change, the first of its writes, and with the answer
        made from `result` (None: the answer is known only after the unit, kept by `keep`).

        Raises KeyTaken, so that nothing of the unit is written, when a live record holds
        the key."""
        render = self.render
        answer = None if result is None or render is None else render(result, now)
        scope, key = self.scope, self.key
        taken = await store.claim(
            tx,
            scope,
            key,
            request_hash=self.request_hash,
            resource_path=resource_path,
            locked_until=self.locked_until,
            response=answer,
            now=now,
            stale_before=now - KEEP,
        )
        if not taken:
            raise KeyTaken(await store.load(tx, scope, key))
        tx.after_commit(functools.partial(self._committed, answer))

    async def require_free(self, tx: Tx, now: datetime) -> None:
        """For a unit that commits without taking the key, having written something (a
        refusal's pumping block, a verification closed as its TTL ran out): raises KeyTaken
        if a live record holds the key, so that a request the key answers otherwise (a
        retry, another request under it) writes nothing at all. One read, on those paths
        only."""
        record = await store.load(tx, self.scope, self.key)
        if record is not None and not is_stale(record, now=now):
            raise KeyTaken(record)

    async def keep(self, tx: Tx, result: object, now: datetime) -> None:
        """In a later unit (the one that records a carrier's answer): the answer made from
        `result`, kept over this request's claim."""
        render = self.render
        if render is None:
            return
        answer = render(result, now)
        kept = await store.store_answer(
            tx,
            self.scope,
            self.key,
            request_hash=self.request_hash,
            locked_until=self.locked_until,
            response=answer,
            resource_path=None,
            now=now,
            stale_before=now - KEEP,
        )
        if kept:
            tx.after_commit(functools.partial(self._committed, answer))

    def _committed(self, answer: StoredResponse | None) -> None:
        self.took = True
        if answer is not None:
            self.kept = answer


_CURRENT: ContextVar[Pending | None] = ContextVar("relay_idempotency_pending", default=None)


def pending() -> Pending | None:
    """The running request's claim, if it came with a key. Read it in the request's own
    task: a unit of work runs in the writer's."""
    return _CURRENT.get()


def running(claim: Pending | None) -> Token[Pending | None]:
    """Make `claim` the running request's; returns the token `done` takes."""
    return _CURRENT.set(claim)


def done(token: Token[Pending | None]) -> None:
    _CURRENT.reset(token)
