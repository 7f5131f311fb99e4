"""The webhook delivery loop: claim → sign → post → record.

Any number of these loops may run, in `relay serve` and in `relay worker`
processes, over one database: a delivery is leased by one conditional UPDATE
(`store.claim_due`), so two loops never send the same attempt at once, and a
loop killed mid-attempt loses its lease when it expires, after which another
loop makes the next attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import logging
import secrets
import time
from datetime import datetime

from relay.events.service import EventService
from relay.events.store import AttemptRecord, Claim
from relay.webhooks import transport
from relay.webhooks.signature import HEADER, sign

log = logging.getLogger("relay.webhooks")

CONCURRENCY = 16


class DeliveryWorker:
    def __init__(
        self,
        events: EventService,
        *,
        concurrency: int = CONCURRENCY,
        poll_interval: float | None = None,
    ) -> None:
        self._events = events
        self._concurrency = concurrency
        self._poll_interval = poll_interval or events.delivery.poll_interval
        self._inflight: dict[str, asyncio.Task[None]] = {}
        # Retries this loop scheduled itself (a heap): it sleeps no longer than
        # the earliest, so short schedules are kept without faster polling.
        self._due: list[datetime] = []
        self.name = f"worker-{secrets.token_hex(6)}"
        self._client: transport.WebhookClient | None = None

    def _http(self) -> transport.WebhookClient:
        if self._client is None:
            settings = self._events.delivery
            self._client = transport.WebhookClient(
                timeout=settings.timeout,
                allowed_networks=settings.allowed_networks,
                ca_bundle=settings.ca_bundle,
                concurrency=self._concurrency,
            )
        return self._client

    async def run(self) -> None:
        """Deliver until cancelled; in-flight attempts are cancelled with it."""
        try:
            while True:
                try:
                    await self.fill()
                except Exception:
                    # A failing claim (database restarting) must not end the loop.
                    log.exception("webhooks.claim_failed")
                await self._pause()
        finally:
            tasks = list(self._inflight.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._client is not None:
                await self._client.aclose()

    async def fill(self) -> int:
        """Claim as many due deliveries as there are free slots and start them."""
        self._events.wake.clear()
        free = self._concurrency - len(self._inflight)
        if free <= 0:
            return 0
        claims = await self._events.claim(owner=self._owner(), limit=free, busy=set(self._inflight))
        for claim in claims:
            task = asyncio.create_task(self._attempt(claim), name=f"relay-webhook-{claim.event_id}")
            self._inflight[claim.event_id] = task
            task.add_done_callback(functools.partial(self._done, claim.event_id))
        return len(claims)

    def _owner(self) -> str:
        # A token per claim, not per worker: a lease is recognised as this
        # claim's own even if this worker claimed the row before.
        return f"{self.name[:20]}-{secrets.token_hex(8)}"

    def _done(self, event_id: str, _task: asyncio.Task[None]) -> None:
        self._inflight.pop(event_id, None)
        # Free slots: look for more work now, but in batches once half the
        # slots are free. A claim is a write transaction; refilling one slot at
        # a time cost one claim per delivery when a backlog drains. New events
        # still wake the loop at their commit (Outbox), and retries by the heap.
        if len(self._inflight) <= self._concurrency // 2:
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

    async def _attempt(self, claim: Claim) -> None:
        at = self._events.now()
        started = time.monotonic()
        try:
            ok, record = await self._send(claim, at)
        except Exception:
            log.exception("webhooks.attempt_crashed", extra={"event_id": claim.event_id})
            ok = False
            record = AttemptRecord(at, None, "internal_error", _ms_since(started))
        try:
            following = await self._events.finish(claim, record, ok=ok)
        except Exception:
            # Unrecorded: the lease runs out and another claim retries it as worker_lost.
            log.exception("webhooks.record_failed", extra={"event_id": claim.event_id})
            return
        _log_attempt(claim, record, ok=ok, lease_lost=following is None)
        if following is not None and following.attempt_at is not None:
            heapq.heappush(self._due, following.attempt_at)

    async def _send(self, claim: Claim, at: datetime) -> tuple[bool, AttemptRecord]:
        secrets_ = await self._events.signing_secrets(claim.account_id)
        if not secrets_:
            # Never send unsigned: receivers could not tell it from a forgery.
            return False, AttemptRecord(at, None, "no_signing_secret", 0)
        headers = {
            "Content-Type": "application/json",
            # A fresh t on every attempt, over the exact bytes sent.
            HEADER: sign(claim.payload, secrets_, timestamp=int(self._events.now().timestamp())),
        }
        result = await self._http().post(claim.webhook_url, claim.payload, headers)
        return result.ok, AttemptRecord(at, result.status_code, result.error, result.duration_ms)


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _log_attempt(claim: Claim, record: AttemptRecord, *, ok: bool, lease_lost: bool) -> None:
    # The URL is not logged: receivers put tokens in query strings.
    log.info(
        "webhooks.delivered" if ok else "webhooks.attempt_failed",
        extra={
            "event_id": claim.event_id,
            "attempt": claim.number,
            "status_code": record.status_code,
            "error": record.error,
            "duration_ms": record.duration_ms,
            "lease_lost": lease_lost,
        },
    )


async def run_delivery(events: EventService) -> None:
    await DeliveryWorker(events).run()
