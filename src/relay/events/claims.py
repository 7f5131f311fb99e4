"""Webhook deliveries in batches: one transaction claims many, one records many.

The delivery loop bounds the attempts in flight per endpoint (scheme, host
and port, as written in the URL). The bound is applied when rows are claimed,
not after: a claimed delivery holds a lease, and one queued in this process
behind a hanging endpoint could outlive its lease and be sent twice. So a
claim skips the endpoints that are full and takes from each of the others no
more than its free slots.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from relay.clock import Clock
from relay.db.driver import Db
from relay.db.sql import Row, Tx
from relay.events import leases, store
from relay.events.schedule import Next, after_attempt, max_attempts
from relay.events.store import AttemptRecord, Claim
from relay.webhooks.guard import endpoint


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

    def full(self) -> list[str]:
        return [key for key, used in self.busy_endpoints.items() if used >= self.per_endpoint]


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
) -> Batch:
    """Lease due deliveries to `owner` within `capacity`; atomic against other workers.

    On PostgreSQL the candidates are locked with SKIP LOCKED, so a concurrent
    claimer takes other rows instead of waiting; on SQLite the write
    transaction (BEGIN IMMEDIATE) already excludes every other writer. The
    UPDATE restates the due condition either way.
    """
    # Room to pass over the rows of endpoints with a few slots left; due rows
    # beyond it are found by a later claim, once those endpoints are full and
    # skipped, at the latest one poll interval later.
    window = capacity.total + capacity.per_endpoint
    rows = await store.candidates(
        tx, now=now, full=capacity.full(), busy=list(capacity.busy_events), window=window
    )
    exhausted = [r["id"] for r in rows if r["attempt_count"] >= max_attempts]
    picked, waiting = _pick(rows, capacity, max_attempts)
    ids = [r["id"] for r in picked]
    # Leased, never recorded, lease over: the worker died mid-attempt.
    lost = [
        (r["id"], r["attempt_count"])
        for r in rows
        if r["lease_until"] is not None and (r["id"] in ids or r["id"] in exhausted)
    ]
    await store.record_lost(tx, lost, now=now)
    await store.drop(tx, exhausted, now=now)
    claims = await store.take(tx, ids, now=now, owner=owner, lease_until=lease_until)
    return Batch(claims, frozenset(waiting))


def _pick(rows: Sequence[Row], capacity: Capacity, max_attempts: int) -> tuple[list[Row], set[str]]:
    """The rows within the capacity, and the endpoints whose slots ran out."""
    taken: Counter[str] = Counter()
    waiting: set[str] = set()
    picked: list[Row] = []
    for row in rows:
        if row["attempt_count"] >= max_attempts:
            continue
        key = endpoint(row["webhook_url"])
        if len(picked) >= capacity.total or taken[key] >= capacity.free_for(key):
            waiting.add(key)
            continue
        taken[key] += 1
        picked.append(row)
    return picked, waiting


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
        # Looked at read-only first: an idle loop must not take SQLite's write lock.
        if capacity.total <= 0 or not await self._db.read(lambda tx: store.any_due(tx, now=now)):
            return Batch([], frozenset())
        return await self._db.write(
            lambda tx: claim_batch(
                tx,
                now=now,
                owner=owner,
                lease_until=lease_until,
                capacity=capacity,
                max_attempts=max_attempts(self._schedule),
            )
        )

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
