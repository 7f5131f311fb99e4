"""Event use cases: reading events back, and the transactions of webhook delivery."""

from __future__ import annotations

import asyncio
import random as random_module
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from relay.accounts import store as account_store
from relay.accounts.models import Caller
from relay.clock import Clock
from relay.config import IpNetwork, Settings
from relay.crypto import Keyring
from relay.db.driver import Db
from relay.errors import ResourceMissing
from relay.events import store
from relay.events.claims import Ledger
from relay.events.store import EventQuery, StoredEvent

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


class EventService:
    def __init__(
        self,
        db: Db,
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

    @property
    def db(self) -> Db:
        """For use cases of their own modules (`relay.events.replay`)."""
        return self._db

    async def retrieve(self, caller: Caller, event_id: str) -> StoredEvent:
        found = await self._db.read(
            lambda tx: store.load(
                tx, account_id=caller.account_id, livemode=caller.livemode, event_id=event_id
            )
        )
        if found is None:
            raise ResourceMissing(f"No such event: {event_id}", param="id")
        return found

    async def list_events(
        self, caller: Caller, query: EventQuery
    ) -> tuple[list[StoredEvent], bool]:
        # One committed state for the page and its attempts.
        return await self._db.snapshot(
            lambda tx: store.list_page(
                tx, account_id=caller.account_id, livemode=caller.livemode, query=query
            )
        )

    async def signing_secrets(self, account_id: str, *, livemode: bool) -> list[str]:
        """The active whsec_ secrets of the account's events of one mode, newest
        first, read afresh for each attempt. Never the other mode's: a test
        secret must not sign a live event."""
        now = self._clock.now()
        sealed = await self._db.read(
            lambda tx: account_store.active_webhook_secrets(
                tx, account_id, livemode=livemode, now=now
            )
        )
        return [self._keyring.unseal(sealed_for, value) for sealed_for, value in sealed]
