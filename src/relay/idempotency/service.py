"""Idempotency keys as use cases: look before the request runs, keep its answer after.

The key itself is taken by the request's own unit of work (`claims.Pending.take`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from relay.accounts.models import Scope
from relay.clock import Clock
from relay.db.driver import Db
from relay.idempotency import store
from relay.idempotency.claims import Pending
from relay.idempotency.models import (
    KEEP,
    Recover,
    Replay,
    StoredResponse,
    decide,
    is_stale,
)


class IdempotencyKeys:
    def __init__(self, db: Db, clock: Clock, *, lease: timedelta) -> None:
        self._db = db
        self._clock = clock
        self._lease = lease

    async def begin(self, scope: Scope, key: str, request_hash: str) -> Pending | Replay | Recover:
        """What to do with a request under `key`: run it (with the claim its unit of work
        takes), replay the stored answer, or answer with the resource a dead holder changed.

        Raises IdempotencyKeyInUse or IdempotencyKeyReused. Reads only."""
        now = self._clock.now()
        record = await self._db.read(lambda tx: store.load(tx, scope, key))
        claim = Pending(scope, key, request_hash, now + self._lease)
        if record is None:
            return claim
        if is_stale(record, now=now):
            claim.seen = record
            return claim
        outcome = decide(record, request_hash=request_hash, now=now)
        if outcome is None:
            claim.seen = record
            return claim
        return outcome

    async def keep(self, claim: Pending, response: StoredResponse) -> None:
        """Store the answer for replays (unless another request holds the key)."""
        await self._store(claim.scope, claim.key, claim.request_hash, claim.locked_until, response)

    async def recovered(
        self, scope: Scope, key: str, request_hash: str, recover: Recover, response: StoredResponse
    ) -> None:
        """The answer made for a dead holder's change, kept in its place."""
        await self._store(scope, key, request_hash, recover.locked_until, response)

    async def let_go(self, claim: Pending) -> None:
        """The request took the key but its answer is not kept (a 5xx, or it crashed): the
        change stands, so the next try gets the resource at once."""
        if not claim.took:
            return
        now = self._clock.now()
        await self._db.write(
            lambda tx: store.let_go(
                tx, claim.scope, claim.key, locked_until=claim.locked_until, now=now
            )
        )

    async def _store(
        self,
        scope: Scope,
        key: str,
        request_hash: str,
        locked_until: datetime,
        response: StoredResponse,
    ) -> None:
        now = self._clock.now()
        await self._db.write(
            lambda tx: store.store_answer(
                tx,
                scope,
                key,
                request_hash=request_hash,
                locked_until=locked_until,
                response=response,
                now=now,
                stale_before=now - KEEP,
            )
        )

    async def prune(self) -> int:
        before = self._clock.now() - KEEP
        return await self._db.write(lambda tx: store.prune(tx, before=before))
