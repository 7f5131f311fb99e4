"""A client of a running Relay server, as the end-to-end carrier tests drive it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from tests.harness import RunningServer, create_account


@asynccontextmanager
async def live_client(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    """A client of `server` holding a new account's live key."""
    account = await asyncio.to_thread(create_account, server.settings)
    async with httpx.AsyncClient(
        base_url=server.base_url,
        verify=server.tls_context(),
        headers={"Authorization": f"Bearer {account.live_key}"},
        timeout=10,
    ) as client:
        yield client
