"""SQLite: a write takes the database's write lock when it begins, and reads see snapshots.

The writer runs its batches on the event loop's thread and opens each with
BEGIN IMMEDIATE; these tests hold it to what the stores rely on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from relay.db.migrate import upgrade
from relay.db.sql import Sql, Tx
from relay.db.sqlite import Checkpointer, SqliteDb


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
    db = SqliteDb(str(database_path))
    try:

        async def look(tx: Tx) -> bool:
            return other_writer_is_locked_out(database_path)

        locked = await db.write(look)
        assert locked
        assert not other_writer_is_locked_out(database_path)  # released on commit
    finally:
        await db.close()


@pytest.mark.asyncio
async def test_a_read_does_not_take_the_write_lock(database_path: Path) -> None:
    db = SqliteDb(str(database_path))
    try:

        async def look(tx: Tx) -> bool:
            return other_writer_is_locked_out(database_path)

        assert not await db.read(look)
    finally:
        await db.close()


@pytest.mark.asyncio
async def test_a_failed_write_leaves_nothing_behind(database_path: Path) -> None:
    db = SqliteDb(str(database_path))

    async def insert_then_fail(tx: Tx) -> None:
        await tx.execute(Sql("CREATE TABLE scratch (n INTEGER)"))
        await tx.execute(Sql("INSERT INTO scratch VALUES (1)"))
        raise RuntimeError("the unit of work failed")

    try:
        with pytest.raises(RuntimeError):
            await db.write(insert_then_fail)
        tables = await db.read(
            lambda tx: tx.fetch(Sql("SELECT name FROM sqlite_master WHERE name = 'scratch'"))
        )
        assert tables == []
        assert not other_writer_is_locked_out(database_path)
    finally:
        await db.close()


def wal_pages(path: Path) -> int:
    """Pages the WAL holds now: its frames from the first, as long as they carry the
    salts of its header (a frame left from before a restart carries older ones)."""
    wal = Path(f"{path}-wal").read_bytes()
    page_size, salts = int.from_bytes(wal[8:12], "big"), wal[16:24]
    frames, offset = 0, 32
    while wal[offset + 8 : offset + 16] == salts:
        frames, offset = frames + 1, offset + 24 + page_size
    return frames


@pytest.mark.asyncio
async def test_after_a_restart_checkpoint_the_next_write_starts_the_wal_over(
    database_path: Path,
) -> None:
    """What the writer waits for between batches once the WAL has grown long."""
    db = SqliteDb(str(database_path))
    insert = Sql("INSERT INTO scratch VALUES (:n)")
    # A reader on an old snapshot keeps any checkpoint from reaching the WAL's end
    # meanwhile, as steady writes do: the WAL grows from commit to commit.
    reader = sqlite3.connect(database_path, isolation_level=None)
    checkpointer = Checkpointer(str(database_path))
    try:
        await db.write(lambda tx: tx.execute(Sql("CREATE TABLE scratch (n INTEGER)")))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM scratch").fetchall()
        for n in range(20):
            await db.write(lambda tx, n=n: tx.execute(insert, {"n": n}))
        grown = wal_pages(database_path)
        reader.execute("COMMIT")
        checkpointer.restart()
        # The restart wrote the new WAL's first frame (and synced its header) itself.
        assert wal_pages(database_path) == 1
        await db.write(lambda tx: tx.execute(insert, {"n": 20}))
        assert wal_pages(database_path) < 4 < grown
        assert not checkpointer.restart_due
    finally:
        checkpointer.stop()
        reader.close()
        await db.close()
