"""Webhook deliveries in batches: one transaction claims many, one records many.

The delivery loop bounds the attempts in flight per endpoint (scheme, host
and port, as written in the URL). The bound is applied when rows are claimed,
not after: a claimed delivery holds a lease, and one queued in this process
behind a hanging endpoint could outlive its lease and be sent twice. So a
claim skips the endpoints that are full, without reading their rows
(`relay.events.due`), and takes from each of the others no more than its free
slots.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from relay.clock import Clock
from relay.db.driver import Db
from relay.db.sql import Tx
from relay.events import due, leases, store
from relay.events.schedule import Next, after_attempt, max_attempts
from relay.events.store import AttemptRecord, Claim


@dataclass(frozen=True)
class Capacity:
    """How many more attempts this loop may start: in total, and per endpoint."""

    total: int
    per_endpoint: int
    busy_endpoints: Mapping[str, int] = field(default_factory=dict)
    # Event ids this loop holds (sending or recording): never claimed again by it.
    busy_events: Collection[str] = ()

    def free_for(self, key: str) -> int:
        return self.per_endpoint - self.busy_endpoints.get(key, 0)


@dataclass(frozen=True)
class Batch:
    claims: list[Claim]
    # Endpoints with due deliveries left behind because their slots ran out.
    waiting: frozenset[str]


@dataclass(frozen=True)
class Finished:
    claim: Claim
    attempt: AttemptRecord
    ok: bool


async def claim_batch(
    tx: Tx,
    *,
    now: datetime,
    owner: str,
    lease_until: datetime,
    capacity: Capacity,
    max_attempts: int,
    endpoints: Sequence[str],
) -> Batch:
    """Lease due deliveries of `endpoints` to `owner` within `capacity`; atomic against
    other workers.

    Endpoints are served in the order given (the one due longest first), each
    no more than its free slots, until the total runs out.
    """
    picked: list[str] = []
    waiting: set[str] = set()
    for key in endpoints:
        room = min(capacity.free_for(key), capacity.total - len(picked))
        if room <= 0:
            waiting.add(key)
            continue
        ids, more = await _due_of(
            tx, key, room, now=now, busy=list(capacity.busy_events), max_attempts=max_attempts
        )
        picked += ids
        if more:
            waiting.add(key)
    claims = await due.take(tx, picked, now=now, owner=owner, lease_until=lease_until)
    return Batch(claims, frozenset(waiting))


async def _due_of(
    tx: Tx, key: str, room: int, *, now: datetime, busy: list[str], max_attempts: int
) -> tuple[list[str], bool]:
    """Up to `room` deliveries of one endpoint to lease, and whether more may be due.

    Rows whose attempts are used up are dropped on the way and do not count
    against the room, so they cannot hold an endpoint's slots empty.
    """
    picked: list[str] = []
    while True:
        limit = room - len(picked)
        rows = await due.candidates(tx, key, now=now, busy=[*busy, *picked], limit=limit)
        exhausted = [r["id"] for r in rows if r["attempt_count"] >= max_attempts]
        # Leased, never recorded, lease over: the worker died mid-attempt.
        lost = [(r["id"], r["attempt_count"]) for r in rows if r["lease_until"] is not None]
        await due.record_lost(tx, lost, now=now)
        await due.drop(tx, exhausted, now=now)
        picked += [r["id"] for r in rows if r["attempt_count"] < max_attempts]
        if len(rows) < limit or not exhausted:
            return picked, len(rows) == limit


async def _outlook(tx: Tx, now: datetime) -> tuple[list[str], bool]:
    return await due.due_endpoints(tx, now=now), await due.any_unkeyed(tx)


class Ledger:
    """The delivery loop's transactions: claim a batch, record a batch."""

    def __init__(
        self,
        db: Db,
        clock: Clock,
        *,
        lease: float,
        schedule: Sequence[float],
        random: Callable[[], float],
    ) -> None:
        self._db = db
        self._clock = clock
        self._lease = lease
        self._schedule = tuple(schedule)
        self._random = random

    async def claim(self, *, owner: str, capacity: Capacity) -> Batch:
        now = self._clock.now()
        lease_until = now + timedelta(seconds=self._lease)
        if capacity.total <= 0:
            return Batch([], frozenset())
        # Looked at read-only first: a loop with nothing due, or only full
        # endpoints due, must not take SQLite's write lock.
        endpoints, unkeyed = await self._db.read(lambda tx: _outlook(tx, now))
        with_room = [key for key in endpoints if capacity.free_for(key) > 0]
        full = frozenset(endpoints) - set(with_room)
        if not with_room and not unkeyed:
            return Batch([], full)

        async def work(tx: Tx) -> Batch:
            targets = with_room
            if unkeyed:
                await due.key_unkeyed(tx)
                # The endpoints just written may have room: looked at again.
                found = await due.due_endpoints(tx, now=now)
                targets = [key for key in found if capacity.free_for(key) > 0]
            return await claim_batch(
                tx,
                now=now,
                owner=owner,
                lease_until=lease_until,
                capacity=capacity,
                max_attempts=max_attempts(self._schedule),
                endpoints=targets,
            )

        batch = await self._db.write(work)
        return Batch(batch.claims, batch.waiting | full)

    async def record(self, finished: Sequence[Finished]) -> list[Next | None]:
        """Record every attempt and what comes next, in one transaction.

        None for an attempt whose lease had been lost to another worker.
        """
        now = self._clock.now()
        following = [
            after_attempt(
                ok=item.ok,
                number=item.claim.number,
                schedule=self._schedule,
                now=now,
                random=self._random,
            )
            for item in finished
        ]

        async def work(tx: Tx) -> list[Next | None]:
            recorded: list[Next | None] = []
            for item, step in zip(finished, following, strict=True):
                kept = await store.record_attempt(
                    tx,
                    item.claim,
                    item.attempt,
                    outcome=step.status,
                    next_attempt_at=step.attempt_at,
                )
                recorded.append(step if kept else None)
            return recorded

        return await self._db.write(work)

    async def release(self, claims: Sequence[Claim]) -> int:
        """Give back claims a stop cancelled before they were answered; how many were."""
        return await self._db.write(lambda tx: leases.release(tx, claims))
