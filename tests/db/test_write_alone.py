"""`Db.write_alone`: a unit whose writes are one statement, which PostgreSQL commits on its own."""

from __future__ import annotations

import pytest

from relay.db.driver import Db
from relay.db.sql import Sql, Tx

CREATE = Sql("CREATE TABLE IF NOT EXISTS alone (id TEXT PRIMARY KEY)")
INSERT = Sql("INSERT INTO alone (id) VALUES (:id)")
ALL_IDS = Sql("SELECT id FROM alone ORDER BY id")


async def stored(db: Db) -> list[str]:
    return [row["id"] for row in await db.read(lambda tx: tx.fetch(ALL_IDS))]


async def test_a_unit_run_alone_commits_and_its_listeners_hear_it(db: Db) -> None:
    await db.write(lambda tx: tx.execute(CREATE))
    heard: list[str] = []
    db.listen("alone", lambda: heard.append("alone"))

    async def unit(tx: Tx) -> int:
        tx.notify("alone")
        return await tx.execute(INSERT, {"id": "a"})

    assert await db.write_alone(unit) == 1
    assert await stored(db) == ["a"]
    assert heard == ["alone"]


async def test_postgresql_refuses_a_second_statement_before_it_runs(db: Db) -> None:
    if db.dialect != "postgresql":
        pytest.skip("SQLite runs a unit alone in the writer's transaction, like any unit")
    await db.write(lambda tx: tx.execute(CREATE))

    async def two(tx: Tx) -> None:
        await tx.execute(INSERT, {"id": "first"})
        await tx.execute(INSERT, {"id": "second"})

    with pytest.raises(RuntimeError, match="one statement"):
        await db.write_alone(two)
    # Autocommit: the first statement committed on its own, the second never ran.
    assert await stored(db) == ["first"]
