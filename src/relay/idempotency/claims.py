"""Keys taken in the unit of work that makes their request's change.

The idempotency middleware looks a key up (read only) and, when the request
may run, leaves a `Pending` claim in a context variable for the request. The
service whose unit of work makes the change takes the key inside that unit
(`Pending.take`): the change and the key commit together or not at all. So a
process killed after its change committed leaves a key that says which
resource it changed, and the retry is answered with that resource instead of
running again (no second SMS); a process killed before leaves nothing.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import datetime

from relay.accounts.models import Scope
from relay.db.sql import Tx
from relay.errors import IdempotencyKeyInUse
from relay.idempotency import store
from relay.idempotency.models import KeyRecord


@dataclass
class Pending:
    """A request under an Idempotency-Key that may run. `locked_until` is its token."""

    scope: Scope
    key: str
    request_hash: str
    locked_until: datetime
    # A record the request may replace: past its 24 hours, or a lapsed claim with no change.
    seen: KeyRecord | None = None
    # Set inside the unit of work; it counts only if that unit committed.
    took: bool = False

    async def take(self, tx: Tx, *, resource_path: str, now: datetime) -> None:
        """Take the key with this unit's change, or fail the unit (409) so nothing of it
        is written: another request holds the key."""
        scope, key, request_hash, until = self.scope, self.key, self.request_hash, self.locked_until
        if self.seen is None:
            taken = await store.try_insert(
                tx,
                scope,
                key,
                request_hash=request_hash,
                resource_path=resource_path,
                locked_until=until,
                now=now,
            )
        else:
            taken = await store.take_over(
                tx,
                scope,
                key,
                seen=self.seen,
                request_hash=request_hash,
                resource_path=resource_path,
                locked_until=until,
                now=now,
            )
        ours = taken or await store.holds(
            tx, scope, key, request_hash=request_hash, locked_until=until
        )
        if not ours:
            raise IdempotencyKeyInUse(param="Idempotency-Key")
        self.took = True

    async def give_back(self, tx: Tx) -> None:
        """In the same unit as `take`: the request was refused and changed nothing, so the
        key is free again (its answer, a 429, is not kept either)."""
        await store.release(
            tx, self.scope, self.key, request_hash=self.request_hash, locked_until=self.locked_until
        )
        self.took = False


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
