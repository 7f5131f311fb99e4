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
from typing import Any

from sqlalchemy import Connection, Row, and_, func, insert, not_, or_, select, update
from sqlalchemy.sql import ColumnElement

from relay.clock import Clock
from relay.db.engine import Database
from relay.db.tables import events, in_state, webhook_attempts
from relay.events.models import DeliveryStatus
from relay.events.schedule import Next, after_attempt, max_attempts
from relay.events.store import WORKER_LOST, AttemptRecord, Claim, record_attempt
from relay.webhooks.guard import endpoint

E = events.c


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


def _not_to(key: str) -> ColumnElement[bool]:
    # A prefix test that `https://a.example` does not pass for `https://a.example.org/`.
    head = func.substr(E.webhook_url, 1, len(key) + 1)
    return not_(or_(E.webhook_url == key, head.in_([key + "/", key + "?", key + "#"])))


def claim_batch(
    conn: Connection,
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
    leasable = or_(E.lease_until.is_(None), E.lease_until <= now)
    conditions = [
        in_state(E.delivery_status, DeliveryStatus.PENDING),
        E.next_attempt_at <= now,
        leasable,
        *(_not_to(key) for key in capacity.full()),
    ]
    if capacity.busy_events:
        conditions.append(E.id.not_in(list(capacity.busy_events)))
    due = (
        select(E.id, E.attempt_count, E.lease_until, E.webhook_url)
        .where(*conditions)
        .order_by(E.next_attempt_at)
        .limit(window)
    )
    if conn.dialect.name == "postgresql":
        due = due.with_for_update(skip_locked=True)
    rows = list(conn.execute(due))
    exhausted = [r.id for r in rows if r.attempt_count >= max_attempts]
    taken: Counter[str] = Counter()
    waiting: set[str] = set()
    picked: list[Row[Any, Any, Any, Any]] = []
    for row in rows:
        if row.attempt_count >= max_attempts:
            continue
        key = endpoint(row.webhook_url)
        if len(picked) >= capacity.total or taken[key] >= capacity.free_for(key):
            waiting.add(key)
            continue
        taken[key] += 1
        picked.append(row)
    lost = [r for r in picked if r.lease_until is not None] + [
        r for r in rows if r.lease_until is not None and r.id in exhausted
    ]
    if lost:
        # Leased, never recorded, lease over: the worker died mid-attempt.
        conn.execute(
            insert(webhook_attempts),
            [
                {"event_id": r.id, "number": r.attempt_count, "at": now, "error": WORKER_LOST}
                for r in lost
            ],
        )
    if exhausted:
        _drop(conn, exhausted, leasable)
    claims: list[Claim] = []
    if picked:
        claimed = conn.execute(
            update(events)
            .where(
                E.id.in_([r.id for r in picked]),
                E.delivery_status == DeliveryStatus.PENDING,
                leasable,
            )
            .values(attempt_count=E.attempt_count + 1, lease_owner=owner, lease_until=lease_until)
            .returning(E.id, E.account_id, E.webhook_url, E.payload, E.attempt_count)
        )
        claims = [
            Claim(r.id, r.account_id, r.webhook_url, r.payload.encode(), r.attempt_count, owner)
            for r in claimed
        ]
    return Batch(claims, frozenset(waiting))


def _drop(conn: Connection, ids: Sequence[str], leasable: ColumnElement[bool]) -> None:
    conn.execute(
        update(events)
        .where(and_(E.id.in_(ids), E.delivery_status == DeliveryStatus.PENDING, leasable))
        .values(
            delivery_status=DeliveryStatus.DROPPED,
            next_attempt_at=None,
            lease_until=None,
            lease_owner=None,
        )
    )


class Ledger:
    """The delivery loop's transactions: claim a batch, record a batch."""

    def __init__(
        self,
        db: Database,
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
        if capacity.total <= 0 or not await self._db.read(lambda c: _any_due(c, now)):
            return Batch([], frozenset())
        return await self._db.write(
            lambda c: claim_batch(
                c,
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

        def work(conn: Connection) -> list[Next | None]:
            return [
                step
                if record_attempt(
                    conn,
                    item.claim,
                    item.attempt,
                    outcome=step.status,
                    next_attempt_at=step.attempt_at,
                )
                else None
                for item, step in zip(finished, following, strict=True)
            ]

        return await self._db.write(work)


def _any_due(conn: Connection, now: datetime) -> Any:
    query = (
        select(E.id)
        .where(in_state(E.delivery_status, DeliveryStatus.PENDING), E.next_attempt_at <= now)
        .limit(1)
    )
    return conn.execute(query).first() is not None
