"""Idempotency keys as use cases: claim before the request runs, then store or release."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial

from relay.accounts.models import Scope
from relay.clock import Clock
from relay.db.driver import Db
from relay.db.sql import Tx
from relay.errors import IdempotencyKeyInUse
from relay.idempotency import store
from relay.idempotency.models import (
    KEEP,
    Lease,
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

    async def begin(self, scope: Scope, key: str, request_hash: str) -> Lease | Replay:
        """Claim the key for this request, or say what to answer instead.

        Raises IdempotencyKeyInUse or IdempotencyKeyReused."""
        for _ in range(3):
            claim = partial(self._claim, scope=scope, key=key, request_hash=request_hash)
            outcome = await self._db.write(partial(claim, now=self._clock.now()))
            if outcome is not None:
                return outcome
        # The key keeps changing hands under us: answer as if it is busy.
        raise IdempotencyKeyInUse(param="Idempotency-Key")

    async def _claim(
        self, tx: Tx, *, scope: Scope, key: str, request_hash: str, now: datetime
    ) -> Lease | Replay | None:
        """None: the row vanished or changed hands while we looked; try again."""
        lease = Lease(now + self._lease)
        if await store.try_insert(
            tx, scope, key, request_hash=request_hash, locked_until=lease.locked_until, now=now
        ):
            return lease
        record = await store.load(tx, scope, key)
        if record is None:
            # Released or pruned between the INSERT and the SELECT: claim again.
            return None
        if not is_stale(record, now=now):
            replay = decide(record, request_hash=request_hash, now=now)
            if replay is not None:
                return replay
        taken = await store.take_over(
            tx,
            scope,
            key,
            seen=record,
            request_hash=request_hash,
            locked_until=lease.locked_until,
            now=now,
        )
        return lease if taken else None

    async def finish(
        self, scope: Scope, key: str, lease: Lease, response: StoredResponse | None
    ) -> None:
        """Store the answer for replays, or (None) free the key so a retry can run."""
        until = lease.locked_until
        if response is None:
            await self._db.write(lambda tx: store.release(tx, scope, key, locked_until=until))
        else:
            await self._db.write(
                lambda tx: store.complete(tx, scope, key, locked_until=until, response=response)
            )

    async def prune(self) -> int:
        before = self._clock.now() - KEEP
        return await self._db.write(lambda tx: store.prune(tx, before=before))
