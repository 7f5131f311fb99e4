"""The background work of one process, started together and stopped gracefully together.

`relay serve` (in its lifespan) and `relay worker` run the same three loops:
the expiry sweep, SMS dispatch and webhook delivery. A stop claims nothing
more, lets the SMS submits and webhook attempts in flight finish within the
grace, then cancels what is left and gives its leases back, so another
process takes that work at once instead of after the lease.
"""

from __future__ import annotations

import asyncio
import logging

from relay.delivery.loop import run_dispatch
from relay.events.delivery import DeliveryWorker
from relay.services import Services
from relay.worker.sweeper import run_sweeper

log = logging.getLogger("relay.worker")


class Background:
    def __init__(self, services: Services) -> None:
        self._services = services
        self._stopping = asyncio.Event()
        self._webhooks = DeliveryWorker(services.events)
        self._sweeper: asyncio.Task[None] | None = None
        self._jobs: list[asyncio.Task[None]] = []

    def start(self) -> None:
        services = self._services
        self._sweeper = asyncio.create_task(run_sweeper(services), name="relay-sweeper")
        self._jobs = [
            asyncio.create_task(
                run_dispatch(services.delivery, stopping=self._stopping), name="relay-dispatch"
            ),
            asyncio.create_task(self._webhooks.run(), name="relay-webhooks"),
        ]

    async def stop(self, *, grace: float) -> None:
        """Finish the claimed jobs within `grace` seconds, then cancel and release the rest."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        # The sweep holds no lease: a sweep cut short is made by the next one.
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._stopping.set()
        self._services.delivery.wake.set()
        self._webhooks.stop()
        if self._jobs:
            _, late = await asyncio.wait(self._jobs, timeout=grace)
            if late:
                log.warning("background.grace_exceeded", extra={"jobs": len(late)})
            for task in late:
                task.cancel()
        await asyncio.gather(
            *self._jobs, *([self._sweeper] if self._sweeper else []), return_exceptions=True
        )
        await self._services.delivery.drain(grace=max(0.0, deadline - loop.time()))
