"""Event use cases: reading events back, and the transactions of webhook delivery."""

from __future__ import annotations

import asyncio
import random as random_module
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection

from relay.accounts import store as account_store
from relay.accounts.models import Caller
from relay.clock import Clock
from relay.config import IpNetwork, Settings
from relay.crypto import Keyring
from relay.db.engine import Database, T, Work
from relay.errors import ResourceMissing
from relay.events import store
from relay.events.claims import Ledger
from relay.events.schedule import Next, after_attempt, max_attempts
from relay.events.store import AttemptRecord, Claim, EventQuery, StoredEvent

# Past the attempt deadline, so a live worker always records before its lease
# ends; short enough that a killed worker's row is retried within seconds.
LEASE_MARGIN = 10.0


@dataclass(frozen=True)
class DeliverySettings:
    timeout: float
    lease: float
    schedule: tuple[float, ...]
    allowed_networks: tuple[IpNetwork, ...]
    ca_bundle: str | None
    poll_interval: float = 0.5
    concurrency: int = 64
    endpoint_concurrency: int = 16

    @classmethod
    def from_settings(cls, settings: Settings) -> DeliverySettings:
        lease = settings.webhook_lease or settings.webhook_timeout + LEASE_MARGIN
        if lease <= settings.webhook_timeout:
            # A lease shorter than an attempt would let a second worker send it too.
            raise ValueError("webhook_lease must be longer than webhook_timeout")
        bundle = settings.webhook_ca_bundle
        return cls(
            timeout=settings.webhook_timeout,
            lease=lease,
            schedule=tuple(settings.webhook_retry_schedule),
            allowed_networks=tuple(settings.webhook_allowed_networks),
            ca_bundle=None if bundle is None else str(bundle),
            poll_interval=settings.webhook_poll_interval,
            concurrency=settings.webhook_concurrency,
            endpoint_concurrency=settings.webhook_endpoint_concurrency,
        )


class Outbox:
    """The Database that domain services write events through.

    After a transaction that recorded a deliverable event commits (never
    before: a rolled-back event must not be looked for), it wakes the
    delivery loop, so the first attempt starts at once instead of at the
    next poll.
    """

    def __init__(self, db: Database, wake: asyncio.Event) -> None:
        self._db = db
        self._wake = wake
        self.dialect = db.dialect

    async def write(self, work: Work[T]) -> T:
        def tracked(conn: Connection) -> tuple[T, bool]:
            conn.info.pop(store.RECORDED, None)
            result = work(conn)
            return result, bool(conn.info.pop(store.RECORDED, False))

        result, recorded = await self._db.write(tracked)
        if recorded:
            self._wake.set()
        return result

    async def read(self, work: Work[T]) -> T:
        return await self._db.read(work)

    async def close(self) -> None:
        await self._db.close()


class EventService:
    def __init__(
        self,
        db: Database,
        keyring: Keyring,
        clock: Clock,
        *,
        delivery: DeliverySettings,
        wake: asyncio.Event,
        random: Callable[[], float] = random_module.random,
    ) -> None:
        self._db = db
        self._keyring = keyring
        self._clock = clock
        self._random = random
        self.delivery = delivery
        self.wake = wake
        # Batched claims and records for the delivery loop (relay.events.claims).
        self.ledger = Ledger(
            db, clock, lease=delivery.lease, schedule=delivery.schedule, random=random
        )

    def now(self) -> datetime:
        return self._clock.now()

    async def retrieve(self, caller: Caller, event_id: str) -> StoredEvent:
        found = await self._db.read(
            lambda c: store.load(
                c, account_id=caller.account_id, livemode=caller.livemode, event_id=event_id
            )
        )
        if found is None:
            raise ResourceMissing(f"No such event: {event_id}", param="id")
        return found

    async def list_events(
        self, caller: Caller, query: EventQuery
    ) -> tuple[list[StoredEvent], bool]:
        return await self._db.read(
            lambda c: store.list_page(
                c, account_id=caller.account_id, livemode=caller.livemode, query=query
            )
        )

    async def claim(self, *, owner: str, limit: int, busy: Collection[str] = ()) -> list[Claim]:
        now = self._clock.now()
        lease_until = now + timedelta(seconds=self.delivery.lease)
        # Looked at read-only first: an idle loop must not take SQLite's write lock.
        if not await self._db.read(lambda c: store.any_due(c, now=now)):
            return []
        return await self._db.write(
            lambda c: store.claim_due(
                c,
                now=now,
                owner=owner,
                lease_until=lease_until,
                limit=limit,
                max_attempts=max_attempts(self.delivery.schedule),
                busy=busy,
            )
        )

    async def signing_secrets(self, account_id: str) -> list[str]:
        """The account's active whsec_ secrets, newest first, read afresh for each attempt."""
        now = self._clock.now()
        sealed = await self._db.read(
            lambda c: account_store.active_webhook_secrets(c, account_id, now=now)
        )
        return [self._keyring.unseal(secret_id, value) for secret_id, value in sealed]

    async def finish(self, claim: Claim, attempt: AttemptRecord, *, ok: bool) -> Next | None:
        """Record the attempt and what comes next; None when the lease had been lost."""
        now = self._clock.now()
        following = after_attempt(
            ok=ok,
            number=claim.number,
            schedule=self.delivery.schedule,
            now=now,
            random=self._random,
        )
        recorded = await self._db.write(
            lambda c: store.record_attempt(
                c, claim, attempt, outcome=following.status, next_attempt_at=following.attempt_at
            )
        )
        return following if recorded else None
