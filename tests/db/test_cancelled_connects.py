"""PostgreSQL: a process stopped while a connection is being opened leaves no half-open
handshake behind, so nothing is logged after it says it stopped."""

from __future__ import annotations

import asyncio
import gc
import os
from typing import Any

import pytest

from relay.db.pg_connect import connect
from relay.db.urls import is_postgres

PG_URL = os.environ.get("RELAY_TEST_DATABASE_URL", "")
pytestmark = pytest.mark.skipif(
    not (PG_URL and is_postgres(PG_URL)),
    reason="needs RELAY_TEST_DATABASE_URL=postgresql://…",
)


async def test_a_connect_cancelled_at_any_moment_leaves_no_unread_error() -> None:
    loop = asyncio.get_running_loop()
    unread: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unread.append(context))
    try:
        # Cancelled ever later, from before the first byte to after the handshake.
        for step in range(80):
            opening = asyncio.ensure_future(connect(PG_URL))
            for _ in range(step % 40):
                await asyncio.sleep(0)
            await asyncio.sleep(0.0001 * (step // 40))
            opening.cancel()
            try:
                connection = await opening
            except asyncio.CancelledError:
                pass
            else:
                await connection.close()
            gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert unread == []


async def test_a_cancelled_connect_still_says_it_was_cancelled() -> None:
    opening = asyncio.ensure_future(connect(PG_URL))
    await asyncio.sleep(0)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
