"""A fresh database of the suite's kind, with one account, for store-level tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy import insert

from relay.db.engine import Database, open_database
from relay.db.tables import accounts
from tests.webhooks.receiver import isolated_database

ACCOUNT_ID = "acct_1"


@pytest_asyncio.fixture
async def db(
    request: pytest.FixtureRequest, tmp_path: Path, database_url: str
) -> AsyncIterator[Database]:
    """Named after the test module, so modules never share one (PostgreSQL)."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    url = await asyncio.to_thread(isolated_database, database_url, name, tmp_path)
    opened = open_database(url)
    created = datetime(2026, 1, 1, tzinfo=UTC)
    await opened.write(
        lambda c: c.execute(
            insert(accounts).values(id=ACCOUNT_ID, name="Acme", brand="Acme", created_at=created)
        )
    )
    try:
        yield opened
    finally:
        await opened.close()
