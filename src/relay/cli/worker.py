"""`relay worker`: the background work of `relay serve`, without the API.

Run as many as you like beside (or instead of, with RELAY_SERVE_BACKGROUND=false)
the servers: deliveries are leased row by row, so workers share them out.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from relay.cli.serve import tune_garbage_collector
from relay.config import Settings
from relay.log import tell
from relay.services import build_services
from relay.worker.background import Background


def work(settings: Settings) -> int:
    """Logging is configured by then (`relay.cli.main`), before the migrations ran."""
    asyncio.run(_run(settings))
    return 0


async def _run(settings: Settings) -> None:
    services = build_services(settings)
    tune_garbage_collector()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await services.delivery.start(dispatch=True)
    work = Background(services)
    work.start()
    print("Relay worker running", flush=True)
    try:
        await stop.wait()
    finally:
        await work.stop(grace=settings.shutdown_timeout)
        await services.close()
    tell("Relay worker stopped", action="worker.stopped", stream=sys.stdout)
