"""The dispatch loop: what `relay serve` and `relay worker` run for the delivery layer.

It submits queued attempts whose lease has passed (throttled ones, those of
API processes that do not send, those of a process that died), fails over
attempts whose receipt is overdue, and applies receipts that overtook their
submit in another process. Any number of loops may share one database.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

from relay.delivery.jobs import Job
from relay.delivery.service import Delivery

log = logging.getLogger("relay.delivery")

POLL_INTERVAL = 0.5
CONCURRENCY = 64
# Parked receipts are rare (a race between processes): look for them less often.


async def run_dispatch(
    delivery: Delivery,
    *,
    poll_interval: float = POLL_INTERVAL,
    concurrency: int = CONCURRENCY,
    stopping: asyncio.Event | None = None,
) -> None:
    """Dispatch until `stopping` is set (and `delivery.wake` with it): claim nothing more,
    let the submits in flight finish. Cancelled, it cancels them; `Delivery.drain`
    then gives their attempts back."""
    stopping = stopping or asyncio.Event()
    inflight: dict[str, asyncio.Task[None]] = {}
    try:
        while not stopping.is_set():
            await _round(delivery, inflight, concurrency)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll_interval):
                    await delivery.wake.wait()
            delivery.wake.clear()
        await asyncio.gather(*inflight.values(), return_exceptions=True)
    finally:
        tasks = list(inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _round(
    delivery: Delivery, inflight: dict[str, asyncio.Task[None]], concurrency: int
) -> None:
    try:
        claimable, overdue, parked = await delivery.work_waiting()
        free = concurrency - len(inflight)
        if claimable and free > 0:
            for job in await delivery.claim(limit=free, busy=list(inflight)):
                task = asyncio.create_task(_dispatch(delivery, job))
                inflight[job.attempt.id] = task
                task.add_done_callback(functools.partial(_finished, inflight, job.attempt.id))
        if overdue:
            await delivery.time_out_reports()
        if parked:
            await delivery.apply_early_reports()
    except Exception:
        # A failing round (database restarting) must not end the loop.
        log.exception("delivery.loop_failed")


async def _dispatch(delivery: Delivery, job: Job) -> None:
    await delivery.dispatch(job)


def _finished(inflight: dict[str, asyncio.Task[None]], key: str, task: asyncio.Task[None]) -> None:
    inflight.pop(key, None)
    if not task.cancelled() and task.exception() is not None:
        log.error("delivery.dispatch_failed attempt=%s", key, exc_info=task.exception())
