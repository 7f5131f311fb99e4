"""A fresh database of the suite's kind, with one account, for store-level tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio

from relay.db.driver import Db, open_db
from relay.db.sql import Sql
from relay.services import Services, build_services
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

ACCOUNT_ID = "acct_1"
_ACCOUNT = Sql(
    "INSERT INTO accounts (id, name, brand, created_at) VALUES (:id, 'Acme', 'Acme', :created)"
)


@pytest_asyncio.fixture
async def db(
    request: pytest.FixtureRequest, tmp_path: Path, database_url: str
) -> AsyncIterator[Db]:
    """Named after the test module, so modules never share one (PostgreSQL)."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    url = await asyncio.to_thread(isolated_database, database_url, name, tmp_path)
    opened = open_db(url)
    created = datetime(2026, 1, 1, tzinfo=UTC)
    await opened.write(lambda tx: tx.execute(_ACCOUNT, {"id": ACCOUNT_ID, "created": created}))
    try:
        yield opened
    finally:
        await opened.close()


@pytest_asyncio.fixture
async def services(
    request: pytest.FixtureRequest, tmp_path: Path, database_url: str
) -> AsyncIterator[Services]:
    """The whole service on a fresh database named after the test module, its delivery
    started, for tests that count what a use case sends to the database."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    url = await asyncio.to_thread(isolated_database, database_url, name, tmp_path)
    built = build_services(test_settings(tmp_path, url))
    await built.delivery.start(dispatch=True)
    await built.accounts.start()
    try:
        yield built
    finally:
        await built.close()
