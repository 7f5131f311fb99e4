"""Alembic environment: SQLite synchronously, PostgreSQL through asyncpg."""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy import Connection, create_engine, event, make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from relay.db.sqlite import BUSY_TIMEOUT_MS, create_file
from relay.db.tables import metadata
from relay.db.urls import is_postgres, sync_url

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
    create_file(make_url(url).database or "")
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # WAL like the server's connections; the lock taken up front, not half-way.
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    with engine.connect() as connection:
        _run(connection)
        connection.commit()
    engine.dispose()


run_migrations_online()
