"""SQLite: a write takes the database's write lock when it begins, and reads see snapshots.

The adapter runs transactions on the event loop's thread and sends BEGIN from
the dialect's own hook; these tests hold it to what the stores rely on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from relay.db.engine import SqliteDatabase
from relay.db.migrate import upgrade


@pytest.fixture
def database_path(tmp_path: Path) -> Path:
    path = tmp_path / "relay.sqlite3"
    upgrade(f"sqlite:///{path}")
    return path


def other_writer_is_locked_out(path: Path) -> bool:
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        return "locked" in str(error)
    else:
        other.execute("ROLLBACK")
        return False
    finally:
        other.close()


@pytest.mark.asyncio
async def test_a_write_holds_the_write_lock_before_its_first_statement(
    database_path: Path,
) -> None:
    db = SqliteDatabase(f"sqlite:///{database_path}")
    try:
        locked = await db.write(lambda conn: other_writer_is_locked_out(database_path))
        assert locked
        assert not other_writer_is_locked_out(database_path)  # released on commit
    finally:
        await db.close()


@pytest.mark.asyncio
async def test_a_read_does_not_take_the_write_lock(database_path: Path) -> None:
    db = SqliteDatabase(f"sqlite:///{database_path}")
    try:
        assert not await db.read(lambda conn: other_writer_is_locked_out(database_path))
    finally:
        await db.close()


@pytest.mark.asyncio
async def test_a_failed_write_leaves_nothing_behind(database_path: Path) -> None:
    db = SqliteDatabase(f"sqlite:///{database_path}")

    def insert_then_fail(conn: Connection) -> None:
        conn.execute(text("CREATE TABLE scratch (n INTEGER)"))
        conn.execute(text("INSERT INTO scratch VALUES (1)"))
        raise RuntimeError("the unit of work failed")

    try:
        with pytest.raises(RuntimeError):
            await db.write(insert_then_fail)
        tables = await db.read(
            lambda conn: conn.execute(
                text("SELECT name FROM sqlite_master WHERE name = 'scratch'")
            ).all()
        )
        assert tables == []
        assert not other_writer_is_locked_out(database_path)
    finally:
        await db.close()
