"""Background expiry: closes verifications whose TTL elapsed and emits their events."""

from __future__ import annotations

import asyncio
import logging

from relay.console import sessions as console_sessions
from relay.delivery import callback_nonces
from relay.retention.prune import prune as prune_retention
from relay.services import Services

log = logging.getLogger("relay.worker")


async def sweep_once(services: Services) -> int:
    closed = 0
    while True:
        batch = await services.verifications.expire_due()
        closed += batch
        if batch == 0:
            return closed


async def prune_once(services: Services) -> int:
    """Drop idempotency keys past their 24 h, abuse counters past their windows, stale
    receipts and callback nonces, console sessions past their expiry."""
    pruned = await services.idempotency.prune()
    now = services.clock.now()
    pruned += await services.db.write(lambda tx: services.abuse.prune(tx, now=now))
    pruned += await services.db.write(lambda tx: console_sessions.prune(tx, now=now))
    pruned += await services.db.write(lambda tx: callback_nonces.prune(tx, now=now))
    pruned += await services.delivery.prune()
    return pruned


async def retention_once(services: Services) -> int:
    """Delete the verifications and messages past their account's `delete_after`, their
    figures kept (relay.retention)."""
    now = services.clock.now()
    return await prune_retention(services.db, now=now, delete_after=services.settings.delete_after)


PRUNE_EVERY = 60.0  # seconds: pruning is housekeeping, not correctness (reads ignore stale rows)


async def run_sweeper(services: Services) -> None:
    next_prune = next_retention = 0.0
    loop = asyncio.get_running_loop()
    while True:
        try:
            closed = await sweep_once(services)
            if closed:
                log.info("verifications.expired", extra={"count": closed})
            if loop.time() >= next_prune:
                next_prune = loop.time() + PRUNE_EVERY
                pruned = await prune_once(services)
                if pruned:
                    log.info("sweeper.pruned", extra={"count": pruned})
            if loop.time() >= next_retention:
                next_retention = loop.time() + services.settings.retention_interval
                deleted = await retention_once(services)
                if deleted:
                    log.info("retention.deleted", extra={"count": deleted})
        except Exception:
            # A failing sweep must not kill the server; it is retried next tick.
            log.exception("sweeper.failed")
        await asyncio.sleep(services.settings.sweep_interval)
