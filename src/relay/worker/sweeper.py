"""Background expiry: closes verifications whose TTL elapsed and emits their events."""

from __future__ import annotations

import asyncio
import logging

from relay.services import Services

log = logging.getLogger("relay.worker")


async def sweep_once(services: Services) -> int:
    closed = 0
    while True:
        batch = await services.verifications.expire_due()
        closed += batch
        if batch == 0:
            return closed


async def run_sweeper(services: Services) -> None:
    while True:
        try:
            closed = await sweep_once(services)
            if closed:
                log.info("verifications.expired", extra={"count": closed})
        except Exception:
            # A failing sweep must not kill the server; it is retried next tick.
            log.exception("sweeper.failed")
        await asyncio.sleep(services.settings.sweep_interval)
