"""Alembic environment: SQLite synchronously, PostgreSQL through asyncpg."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine

from relay.db.engine import is_postgres, sqlite_engine, sync_url
from relay.db.tables import metadata

# Several processes may start at once against one PostgreSQL: one migrates, the rest wait.
_MIGRATION_LOCK = 7_340_112


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
        context.run_migrations()


async def _run_postgres(url: str) -> None:
    engine = create_async_engine(sync_url(url))
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


def run_migrations_online() -> None:
    url: str = context.config.attributes["relay_url"]
    if is_postgres(url):
        asyncio.run(_run_postgres(url))
        return
    engine = sqlite_engine(url, begin="BEGIN IMMEDIATE")
    with engine.connect() as connection:
        _run(connection)
        connection.commit()
    engine.dispose()


run_migrations_online()
