"""`Db.write_folded`: a unit that only inserts, its writes made under a gate; PostgreSQL makes
them one statement (data-modifying CTEs), committed on its own."""

from __future__ import annotations

import pytest

from relay.db.driver import Db
from relay.db.folding import Gate, fold
from relay.db.sql import IntegrityViolation, Sql, Tx

CREATE_PARENTS = Sql("CREATE TABLE IF NOT EXISTS parents (id TEXT PRIMARY KEY, n INTEGER)")
CREATE_CHILDREN = Sql(
    "CREATE TABLE IF NOT EXISTS children (id TEXT PRIMARY KEY,"
    " parent_id TEXT NOT NULL REFERENCES parents (id), label TEXT)"
)
PARENT = Sql(
    "INSERT INTO parents (id, n) VALUES (:id, :n)"
    " ON CONFLICT (id) DO UPDATE SET n = parents.n + excluded.n"
)
CHILD = Sql("INSERT INTO children (id, parent_id, label) VALUES (:id, :parent, :label)")
# Open while the parents add up to less than `:cap`.
UNDER_CAP = Sql("SELECT 1 AS open WHERE (SELECT COALESCE(SUM(n), 0) FROM parents) < :cap")
PARENTS = Sql("SELECT id, n FROM parents ORDER BY id")
CHILDREN = Sql("SELECT id, parent_id, label FROM children ORDER BY id")


async def tables(db: Db) -> None:
    await db.write(lambda tx: tx.execute(CREATE_PARENTS))
    await db.write(lambda tx: tx.execute(CREATE_CHILDREN))


async def stored(db: Db) -> tuple[list[tuple[str, int]], list[tuple[str, str, str]]]:
    async def both(tx: Tx) -> tuple[list[tuple[str, int]], list[tuple[str, str, str]]]:
        parents = [(row["id"], row["n"]) for row in await tx.fetch(PARENTS)]
        children = [(row["id"], row["parent_id"], row["label"]) for row in await tx.fetch(CHILDREN)]
        return parents, children

    return await db.read(both)


async def family(tx: Tx, parent: str, *children: str) -> str:
    """A parent (added to, if it exists) and its children, which refer to it."""
    await tx.executemany(PARENT, [{"id": parent, "n": 1}])
    await tx.executemany(
        CHILD, [{"id": child, "parent": parent, "label": "it's ("} for child in children]
    )
    tx.notify("families")
    return parent


async def test_every_insert_of_a_unit_under_an_open_gate_commits(db: Db) -> None:
    await tables(db)
    heard: list[str] = []
    db.listen("families", lambda: heard.append("families"))
    written = await db.write_folded(
        lambda tx: family(tx, "p1", "c1", "c2"), Gate(UNDER_CAP, {"cap": 5})
    )
    assert written == "p1"
    assert await stored(db) == ([("p1", 1)], [("c1", "p1", "it's ("), ("c2", "p1", "it's (")])
    assert heard == ["families"]


async def test_an_upsert_folded_adds_to_the_row_it_finds(db: Db) -> None:
    await tables(db)
    await db.write_folded(lambda tx: family(tx, "p1", "c1"), Gate(UNDER_CAP, {"cap": 5}))
    await db.write_folded(lambda tx: family(tx, "p1", "c2"), Gate(UNDER_CAP, {"cap": 5}))
    assert (await stored(db))[0] == [("p1", 2)]


async def test_a_closed_gate_writes_nothing_and_tells_no_one(db: Db) -> None:
    await tables(db)
    heard: list[str] = []
    db.listen("families", lambda: heard.append("families"))
    await db.write_folded(lambda tx: family(tx, "p1", "c1"), Gate(UNDER_CAP, {"cap": 1}))
    heard.clear()
    written = await db.write_folded(lambda tx: family(tx, "p2", "c2"), Gate(UNDER_CAP, {"cap": 1}))
    assert written is None
    assert await stored(db) == ([("p1", 1)], [("c1", "p1", "it's (")])
    assert heard == []


async def test_a_unique_violation_in_any_insert_writes_none_of_them(db: Db) -> None:
    await tables(db)
    await db.write_folded(lambda tx: family(tx, "p1", "c1"), Gate(UNDER_CAP, {"cap": 5}))
    with pytest.raises(IntegrityViolation):
        await db.write_folded(lambda tx: family(tx, "p2", "c2", "c1"), Gate(UNDER_CAP, {"cap": 5}))
    assert await stored(db) == ([("p1", 1)], [("c1", "p1", "it's (")])


async def test_postgresql_refuses_a_read_in_a_folded_unit_before_anything_runs(db: Db) -> None:
    if db.dialect != "postgresql":
        pytest.skip("SQLite runs a folded unit in the writer's transaction, like any unit")
    await tables(db)

    async def reads(tx: Tx) -> None:
        await tx.fetch(PARENTS)

    with pytest.raises(RuntimeError, match="reads nothing"):
        await db.write_folded(reads, Gate(UNDER_CAP, {"cap": 5}))


def test_a_fold_is_one_statement_of_a_cte_per_row_each_selecting_from_the_gate() -> None:
    statement, params = fold(
        Gate(UNDER_CAP, {"cap": 5}),
        [
            (PARENT, [{"id": "p", "n": 1}]),
            (
                CHILD,
                [
                    {"id": "c1", "parent": "p", "label": "a"},
                    {"id": "c2", "parent": "p", "label": "b"},
                ],
            ),
        ],
    )
    assert statement.text == (
        "WITH gate AS (SELECT 1 AS open WHERE (SELECT COALESCE(SUM(n), 0) FROM parents)"
        " < :cap__g), w0 AS (INSERT INTO parents (id, n) SELECT :id__0, :n__0 FROM gate"
        " ON CONFLICT (id) DO UPDATE SET n = parents.n + excluded.n),"
        " w1 AS (INSERT INTO children (id, parent_id, label)"
        " SELECT :id__1, :parent__1, :label__1 FROM gate),"
        " w2 AS (INSERT INTO children (id, parent_id, label)"
        " SELECT :id__2, :parent__2, :label__2 FROM gate)"
        " SELECT count(*) AS written FROM gate"
    )
    assert params == {
        "cap__g": 5,
        "id__0": "p",
        "n__0": 1,
        "id__1": "c1",
        "parent__1": "p",
        "label__1": "a",
        "id__2": "c2",
        "parent__2": "p",
        "label__2": "b",
    }


def test_only_inserts_of_one_values_row_written_for_both_databases_fold() -> None:
    gate = Gate(UNDER_CAP, {"cap": 5})
    update = Sql("UPDATE parents SET n = n + 1 WHERE id = :id")
    own_text = Sql(
        "INSERT INTO parents (id) VALUES (:id)",
        postgres="INSERT INTO parents (id) VALUES (CAST(:id AS text))",
    )
    for statement in (update, own_text):
        with pytest.raises(ValueError, match="fold"):
            fold(gate, [(statement, [{"id": "p"}])])
