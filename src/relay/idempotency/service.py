"""Idempotency keys as use cases, around the unit of work that takes the key.

A request's key is taken by its own unit of work, with its answer
(`claims.Pending.take`). What is left here runs only off that path: deciding
from a record a unit found in its way, keeping an answer a unit did not know
(a carrier that answers over the network, an error), and the sweep.
"""

from __future__ import annotations

from datetime import timedelta

from relay.accounts.models import Scope
from relay.clock import Clock
from relay.db.driver import Db
from relay.errors import IdempotencyKeyInUse
from relay.idempotency import store
from relay.idempotency.claims import Pending
from relay.idempotency.models import (
    KEEP,
    KeyRecord,
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

    def claim(self, scope: Scope, key: str, request_hash: str) -> Pending:
        """The claim a request under `key` runs with; nothing is read or written yet."""
        return Pending(scope, key, request_hash, self._clock.now() + self._lease)

    def taken(self, claim: Pending, record: KeyRecord | None) -> Replay | Recover:
        """The answer to a request whose unit found its key held by `record`.

        Raises IdempotencyKeyInUse or IdempotencyKeyReused."""
        if record is None:
            # Gone between the write that met it and the read (the sweep): try again.
            raise IdempotencyKeyInUse(param="Idempotency-Key")
        return decide(record, request_hash=claim.request_hash, now=self._clock.now())

    async def settle(self, claim: Pending) -> Replay | Recover | None:
        """For a request whose answer no unit kept under its key (a refusal, an error, a
        404): the record another try left, which answers instead; None if there is none
        and this request's own answer stands. One read.

        Raises IdempotencyKeyInUse or IdempotencyKeyReused."""
        record = await self._db.read(lambda tx: store.load(tx, claim.scope, claim.key))
        now = self._clock.now()
        if record is None or is_stale(record, now=now):
            return None
        return decide(record, request_hash=claim.request_hash, now=now)

    async def keep(self, claim: Pending, response: StoredResponse) -> None:
        """Store the answer for replays (unless another request holds the key)."""
        await self._store(claim.scope, claim.key, claim.request_hash, claim, response)

    async def recovered(self, claim: Pending, recover: Recover, response: StoredResponse) -> None:
        """The answer made for a dead holder's change, kept in its place."""
        await self._store(claim.scope, claim.key, claim.request_hash, recover, response)

    async def let_go(self, claim: Pending) -> None:
        """The request took the key but its answer is not kept (a 5xx, or it crashed): the
        change stands, so the next try gets the resource at once."""
        if not claim.took or claim.kept is not None:
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
        holder: Pending | Recover,
        response: StoredResponse,
    ) -> None:
        now = self._clock.now()
        locked_until = holder.locked_until
        await self._db.write(
            lambda tx: store.store_answer(
                tx,
                scope,
                key,
                request_hash=request_hash,
                locked_until=locked_until,
                response=response,
                resource_path=None,
                now=now,
                stale_before=now - KEEP,
            )
        )

    async def prune(self) -> int:
        before = self._clock.now() - KEEP
        return await self._db.write(lambda tx: store.prune(tx, before=before))
