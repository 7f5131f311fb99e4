"""One Relay of the erasure tests' own, in process, on a database of its own: a create's
attempt stays queued until a test dispatches it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from relay.accounts.models import NewAccount
from relay.services import Services, build_services
from relay.web.app import RelayApp, create_app
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database


@pytest_asyncio.fixture
async def services(tmp_path: Path, database_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "erasure", tmp_path)
    built = build_services(
        test_settings(
            tmp_path,
            url,
            carriers={"live-a": {"kind": "sandbox"}},
            routes={"default": ["live-a"]},
        )
    )
    # Nothing is sent unless a test dispatches: a create's attempt stays queued.
    await built.delivery.start(dispatch=False)
    await built.accounts.start()
    try:
        yield built
    finally:
        await built.close()


@pytest_asyncio.fixture
async def account(services: Services) -> NewAccount:
    return await services.accounts.create_account("Acme")


@pytest.fixture
def app(services: Services) -> RelayApp:
    return create_app(services, background=False)
