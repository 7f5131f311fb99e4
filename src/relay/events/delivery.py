"""The webhook delivery loop: claim a batch → sign → post concurrently → record a batch.

Any number of these loops may run, in `relay serve` and in `relay worker`
processes, over one database: a delivery is leased by one conditional UPDATE
(`claims.claim_batch`), so two loops never send the same attempt at once, and
a loop killed mid-attempt loses its lease when it expires, after which another
loop makes the next attempt.

Attempts in flight are bounded in total and per endpoint, and the bound is
applied when deliveries are claimed: a receiver that hangs holds at most its
endpoint's slots, and every other endpoint's deliveries go on beside it.
Finished attempts are recorded together, one transaction for all those that
finish within `RECORD_DELAY`; an attempt's slot is free as soon as its answer
is in, before it is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import logging
import secrets
import time
from collections import Counter
from datetime import datetime

from relay.events.claims import Capacity, Finished
from relay.events.service import EventService
from relay.events.store import AttemptRecord, Claim
from relay.metrics import observe
from relay.webhooks import transport
from relay.webhooks.guard import endpoint
from relay.webhooks.signature import HEADER, sign

log = logging.getLogger("relay.webhooks")

# Long enough for the attempts finishing together to share one commit, short
# beside any retry delay. Only the record waits: the slot is already free.
RECORD_DELAY = 0.01


class DeliveryWorker:
    def __init__(
        self,
        events: EventService,
        *,
        concurrency: int | None = None,
        endpoint_concurrency: int | None = None,
        poll_interval: float | None = None,
    ) -> None:
        settings = events.delivery
        self._events = events
        self._total = concurrency or settings.concurrency
        self._per_endpoint = min(endpoint_concurrency or settings.endpoint_concurrency, self._total)
        self._poll_interval = poll_interval or settings.poll_interval
        self._sending: dict[str, asyncio.Task[None]] = {}
        self._endpoints: Counter[str] = Counter()
        # Answered but not yet recorded: still this loop's, never claimed again by it.
        self._unrecorded: dict[str, Finished] = {}
        self._recorder: asyncio.Task[None] | None = None
        # Endpoints the last claims left due deliveries behind for, for want of slots.
        self._waiting: frozenset[str] = frozenset()
        self._total_was_full = False
        # Retries this loop scheduled itself (a heap): it sleeps no longer than
        # the earliest, so short schedules are kept without faster polling.
        self._due: list[datetime] = []
        self.name = f"worker-{secrets.token_hex(6)}"
        self._client: transport.WebhookClient | None = None
        # Claimed and not yet answered: given back if a stop cancels them.
        self._held: dict[str, Claim] = {}
        self._stopping = False

    def _http(self) -> transport.WebhookClient:
        if self._client is None:
            settings = self._events.delivery
            self._client = transport.WebhookClient(
                timeout=settings.timeout,
                allowed_networks=settings.allowed_networks,
                ca_bundle=settings.ca_bundle,
                concurrency=self._per_endpoint,
            )
        return self._client

    async def run(self) -> None:
        """Deliver until `stop`, which lets the attempts in flight end and be recorded.

        Cancelled instead (or while those end), attempts in flight are cancelled,
        those already answered are recorded, and the others given back
        (`relay.events.leases`) for the next claim to make again.
        """
        try:
            while not self._stopping:
                try:
                    await self.fill()
                except Exception:
                    # A failing claim (database restarting) must not end the loop.
                    log.exception("webhooks.claim_failed")
                await self._pause()
            await asyncio.gather(*self._sending.values(), return_exceptions=True)
        finally:
            await self._wind_down()

    def stop(self) -> None:
        """Claim nothing more; `run` returns once the attempts in flight are recorded."""
        self._stopping = True
        self._events.wake.set()

    async def _wind_down(self) -> None:
        tasks = list(self._sending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._recorder is not None:
            self._recorder.cancel()
            await asyncio.gather(self._recorder, return_exceptions=True)
        # Answered attempts are recorded now rather than sent again after their lease.
        await self._record_pending()
        if self._held:
            held = list(self._held.values())
            try:
                released = await self._events.ledger.release(held)
                log.info("webhooks.released", extra={"attempts": released})
            except Exception:
                # Not given back: their leases run out and another claim retries them.
                log.exception("webhooks.release_failed", extra={"attempts": len(held)})
        if self._client is not None:
            await self._client.aclose()

    async def fill(self) -> int:
        """Claim due deliveries into the free slots and start them; how many started."""
        self._events.wake.clear()
        capacity = Capacity(
            total=self._total - len(self._sending),
            per_endpoint=self._per_endpoint,
            busy_endpoints=dict(self._endpoints),
            busy_events=self._sending.keys() | self._unrecorded.keys(),
        )
        batch = await self._events.ledger.claim(owner=self._owner(), capacity=capacity)
        await self._start(batch.claims)
        self._waiting = batch.waiting
        self._total_was_full = bool(batch.waiting) and len(self._sending) >= self._total
        return len(batch.claims)

    async def _start(self, claims: list[Claim]) -> None:
        if not claims:
            return
        # Read once per batch, still afresh for each attempt: a rolled secret
        # signs from the next claim on. Each event is signed with its own
        # mode's secrets only.
        signing = {
            (account_id, livemode): await self._events.signing_secrets(
                account_id, livemode=livemode
            )
            for account_id, livemode in {(claim.account_id, claim.livemode) for claim in claims}
        }
        for claim in claims:
            key = endpoint(claim.webhook_url)
            self._endpoints[key] += 1
            self._held[claim.event_id] = claim
            task = asyncio.create_task(
                self._attempt(claim, signing[claim.account_id, claim.livemode]),
                name=f"relay-webhook-{claim.event_id}",
            )
            self._sending[claim.event_id] = task
            task.add_done_callback(functools.partial(self._sent, claim.event_id, key))

    def _owner(self) -> str:
        # A token per claim, not per worker: a lease is recognised as this
        # claim's own even if this worker claimed the row before.
        return f"{self.name[:20]}-{secrets.token_hex(8)}"

    def _sent(self, event_id: str, key: str, _task: asyncio.Task[None]) -> None:
        self._sending.pop(event_id, None)
        self._endpoints[key] -= 1
        if not self._endpoints[key]:
            del self._endpoints[key]
        # Look for more work once half an endpoint's slots (or half of all) are
        # free, not at every answer: a claim is a write transaction, and one
        # per delivery was the cost of draining a backlog. New events wake the
        # loop after their commit (the "events" channel), retries by the heap.
        endpoint_freed = key in self._waiting and self._endpoints[key] <= self._per_endpoint // 2
        total_freed = self._total_was_full and len(self._sending) <= self._total // 2
        if endpoint_freed or total_freed:
            self._events.wake.set()

    async def _pause(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._sleep_for()):
                await self._events.wake.wait()

    def _sleep_for(self) -> float:
        now = self._events.now()
        if self._due and self._due[0] <= now:
            while self._due and self._due[0] <= now:
                heapq.heappop(self._due)
            return 0.0
        if not self._due:
            return self._poll_interval
        return min(self._poll_interval, (self._due[0] - now).total_seconds())

    async def _attempt(self, claim: Claim, signing: list[str]) -> None:
        at = self._events.now()
        started = time.monotonic()
        try:
            ok, record = await self._send(claim, signing, at)
        except Exception:
            log.exception("webhooks.attempt_crashed", extra={"event_id": claim.event_id})
            ok = False
            record = AttemptRecord(at, None, "internal_error", _ms_since(started))
        self._held.pop(claim.event_id, None)
        self._unrecorded[claim.event_id] = Finished(claim, record, ok)
        if self._recorder is None or self._recorder.done():
            self._recorder = asyncio.create_task(self._record_soon(), name="relay-webhook-record")

    async def _send(
        self, claim: Claim, signing: list[str], at: datetime
    ) -> tuple[bool, AttemptRecord]:
        if not signing:
            # Never send unsigned: receivers could not tell it from a forgery.
            return False, AttemptRecord(at, None, "no_signing_secret", 0)
        headers = {
            "Content-Type": "application/json",
            # A fresh t on every attempt, over the exact bytes sent.
            HEADER: sign(claim.payload, signing, timestamp=int(self._events.now().timestamp())),
        }
        result = await self._http().post(claim.webhook_url, claim.payload, headers)
        return result.ok, AttemptRecord(
            at, result.status_code, result.error, result.duration_ms, result.excerpt
        )

    async def _record_soon(self) -> None:
        await asyncio.sleep(RECORD_DELAY)
        while self._unrecorded:
            await self._record_pending()

    async def _record_pending(self) -> None:
        finished = list(self._unrecorded.values())
        if not finished:
            return
        try:
            following = await self._events.ledger.record(finished)
        except Exception:
            # Unrecorded: the leases run out and another claim retries them as worker_lost.
            log.exception("webhooks.record_failed", extra={"attempts": len(finished)})
            following = None
        for index, item in enumerate(finished):
            self._unrecorded.pop(item.claim.event_id, None)
            if following is None:
                continue
            step = following[index]
            _log_attempt(item, lease_lost=step is None)
            if step is not None:
                observe.webhook_attempt(step.status, seconds=(item.attempt.duration_ms or 0) / 1000)
            if step is not None and step.attempt_at is not None:
                heapq.heappush(self._due, step.attempt_at)
                # The loop may be asleep for a whole poll interval: let it
                # shorten its sleep to this retry.
                self._events.wake.set()


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _log_attempt(item: Finished, *, lease_lost: bool) -> None:
    # The URL is not logged: receivers put tokens in query strings.
    record = item.attempt
    log.info(
        "webhooks.delivered" if item.ok else "webhooks.attempt_failed",
        extra={
            "event_id": item.claim.event_id,
            "attempt": item.claim.number,
            "status_code": record.status_code,
            "error": record.error,
            "duration_ms": record.duration_ms,
            "lease_lost": lease_lost,
        },
    )
