"""The migrations build exactly the schema the code declares, and step back cleanly."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from relay.db.migrate import downgrade, upgrade
from relay.db.tables import metadata
from relay.db.urls import is_postgres, sync_url
from tests.webhooks.receiver import isolated_database


def _compare(conn: Connection) -> list[object]:
    differences: list[object] = compare_metadata(MigrationContext.configure(conn), metadata)
    return differences


def drift(url: str) -> list[object]:
    if not is_postgres(url):
        engine = create_engine(url)
        with engine.connect() as conn:
            found = _compare(conn)
        engine.dispose()
        return found

    async def on_postgres() -> list[object]:
        engine = create_async_engine(sync_url(url))
        async with engine.connect() as conn:
            found = await conn.run_sync(_compare)
        await engine.dispose()
        return found

    return asyncio.run(on_postgres())


def test_migrations_match_the_declared_tables(tmp_path: Path, database_url: str) -> None:
    url = isolated_database(database_url, "migrations", tmp_path)
    assert drift(url) == []


def test_the_delivery_migration_downgrades_and_upgrades_again(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_down", tmp_path)
    downgrade(url, "0003")
    upgrade(url)
    assert drift(url) == []
