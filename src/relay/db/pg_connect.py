"""Opening a PostgreSQL connection that a cancellation cannot leave half open.

asyncpg cancelled during its TLS negotiation (the default `sslmode=prefer` asks the
server first) leaves behind a future whose error nobody reads; asyncio logs it
("Future exception was never retrieved") when it is collected, after a process
has said it stopped. A shutdown that lands on a connect therefore lets the
handshake end, for at most HANDSHAKE_GRACE, and closes what it opened.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

HANDSHAKE_GRACE = 5.0


async def connect(dsn: str, **options: Any) -> Any:
    connecting = asyncio.ensure_future(asyncpg.connect(dsn, **options))
    try:
        return await asyncio.shield(connecting)
    except asyncio.CancelledError:
        done, _ = await asyncio.wait({connecting}, timeout=HANDSHAKE_GRACE)
        if not done:
            connecting.cancel()
        elif connecting.exception() is None:
            connecting.result().terminate()
        raise
