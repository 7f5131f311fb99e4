"""Group commit on the suite's database: batches, savepoints, and answers only after COMMIT."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from relay.db.driver import Db, open_db
from relay.db.group_commit import RETRIES
from relay.db.sql import IntegrityViolation, MustRetry, Sql, Tx
from tests.webhooks.receiver import isolated_database

CREATE = Sql("CREATE TABLE IF NOT EXISTS probe (id TEXT PRIMARY KEY, n INTEGER NOT NULL)")
INSERT = Sql("INSERT INTO probe (id, n) VALUES (:id, :n)")
ALL_IDS = Sql("SELECT id FROM probe ORDER BY id")
COUNT = Sql("SELECT count(*) AS n FROM probe")


@pytest.fixture
def probe_url(tmp_path: Path, database_url: str) -> str:
    return isolated_database(database_url, "group_commit", tmp_path)


@pytest_asyncio.fixture
async def db(probe_url: str) -> AsyncIterator[Db]:
    # Batches of up to 64 on both databases (PostgreSQL's default is one unit each).
    opened = open_db(probe_url, max_batch=64)
    await opened.write(lambda tx: tx.execute(CREATE))
    try:
        yield opened
    finally:
        await opened.close()


def insert(row_id: str, *, then_fail: bool = False):  # type: ignore[no-untyped-def]
    async def unit(tx: Tx) -> str:
        await tx.execute(INSERT, {"id": row_id, "n": 1})
        if then_fail:
            raise ValueError(row_id)
        return row_id

    return unit


async def stored(db: Db) -> list[str]:
    rows = await db.read(lambda tx: tx.fetch(ALL_IDS))
    return [row["id"] for row in rows]


async def test_concurrent_writes_share_commits(db: Db) -> None:
    before = db.commits  # type: ignore[attr-defined]
    answers = await asyncio.gather(*(db.write(insert(f"r{n:02}")) for n in range(40)))
    assert answers == [f"r{n:02}" for n in range(40)]
    assert await stored(db) == answers
    assert db.commits - before < 40  # type: ignore[attr-defined]


async def test_a_failing_unit_rolls_back_alone_and_its_batch_commits(db: Db) -> None:
    results = await asyncio.gather(
        db.write(insert("a")),
        db.write(insert("b", then_fail=True)),
        db.write(insert("c")),
        return_exceptions=True,
    )
    assert results[0] == "a"
    assert isinstance(results[1], ValueError)
    assert results[2] == "c"
    assert await stored(db) == ["a", "c"]


async def test_a_constraint_violation_fails_only_its_own_unit(db: Db) -> None:
    await db.write(insert("taken"))
    results = await asyncio.gather(
        db.write(insert("x")),
        db.write(insert("taken")),
        db.write(insert("y")),
        return_exceptions=True,
    )
    assert isinstance(results[1], IntegrityViolation)
    assert await stored(db) == ["taken", "x", "y"]


async def test_a_lone_failing_unit_leaves_nothing_behind(db: Db) -> None:
    with pytest.raises(ValueError, match="solo"):
        await db.write(insert("solo", then_fail=True))
    assert await stored(db) == []
    assert await db.write(insert("after")) == "after"


async def test_a_snapshot_reads_one_committed_state(db: Db) -> None:
    await db.write(insert("one"))

    async def two_reads(tx: Tx) -> tuple[int, int]:
        first = await tx.fetchrow(COUNT)
        second = await tx.fetchrow(COUNT)
        assert first is not None
        assert second is not None
        return first["n"], second["n"]

    assert await db.snapshot(two_reads) == (1, 1)


WRITER = """
import asyncio, sys
from relay.db.driver import open_db
from tests.db.test_group_commit import CREATE, insert

async def main(url):
    db = open_db(url)
    await db.write(lambda tx: tx.execute(CREATE))
    n = 0
    while True:
        batch = [db.write(insert(f"k{n + i:06}")) for i in range(16)]
        n += 16
        for done in asyncio.as_completed(batch):
            print(await done, flush=True)

asyncio.run(main(sys.argv[1]))
"""


def test_a_process_killed_mid_batch_loses_no_answered_write(probe_url: str) -> None:
    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, probe_url],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert child.stdout is not None
    answered = [child.stdout.readline() for _ in range(500)]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    answered += child.stdout.read().split()

    async def kept() -> set[str]:
        db = open_db(probe_url)
        try:
            return set(await stored(db))
        finally:
            await db.close()

    assert {line.strip() for line in answered} <= asyncio.run(kept())


async def test_listeners_hear_only_committed_notices(db: Db) -> None:
    heard: list[str] = []
    db.listen("events", lambda: heard.append("events"))

    def notifying(row_id: str, *, then_fail: bool = False):  # type: ignore[no-untyped-def]
        async def unit(tx: Tx) -> None:
            tx.notify("events")
            await insert(row_id, then_fail=then_fail)(tx)

        return unit

    with pytest.raises(ValueError, match="lost"):
        await db.write(notifying("lost", then_fail=True))
    assert heard == []
    await asyncio.gather(db.write(notifying("kept")), db.write(insert("plain")))
    assert heard == ["events"]


async def test_after_commit_callbacks_run_for_committed_units_only(db: Db) -> None:
    ran: list[str] = []

    def remembering(row_id: str, *, then_fail: bool = False):  # type: ignore[no-untyped-def]
        async def unit(tx: Tx) -> str:
            tx.after_commit(lambda: ran.append(row_id))
            return await insert(row_id, then_fail=then_fail)(tx)

        return unit

    with pytest.raises(ValueError, match="alone-lost"):
        await db.write(remembering("alone-lost", then_fail=True))
    answers = await asyncio.gather(
        *(db.write(remembering(f"b{n}", then_fail=n % 2 == 1)) for n in range(6)),
        return_exceptions=True,
    )
    assert [isinstance(answer, ValueError) for answer in answers] == [False, True] * 3
    assert sorted(ran) == ["b0", "b2", "b4"]


async def test_a_unit_that_gave_way_runs_its_callback_once(db: Db) -> None:
    ran: list[int] = []
    tries: list[int] = []
    victim = giving_way("victim", times=1, tries=tries)

    async def unit(tx: Tx) -> str:
        tx.after_commit(lambda: ran.append(1))
        result: str = await victim(tx)
        return result

    assert await db.write(unit) == "victim"
    assert ran == [1]


async def test_a_tracer_sees_every_statement(db: Db) -> None:
    seen: list[Sql] = []
    db.trace(lambda statement, _: seen.append(statement))
    await db.write(insert("traced"))
    await stored(db)
    assert seen == [INSERT, ALL_IDS]


def giving_way(row_id: str, *, times: int, tries: list[int]):  # type: ignore[no-untyped-def]
    """A unit the database makes give way `times` times (as a deadlock victim), then not."""

    async def unit(tx: Tx) -> str:
        tries.append(1)
        await tx.execute(INSERT, {"id": row_id, "n": len(tries)})
        if len(tries) <= times:
            raise MustRetry("deadlock detected")
        return row_id

    return unit


async def test_a_deadlock_victim_runs_again_and_commits_once(db: Db) -> None:
    alone: list[int] = []
    assert await db.write(giving_way("alone", times=1, tries=alone)) == "alone"
    batched: list[int] = []
    results = await asyncio.gather(
        db.write(insert("first")),
        db.write(giving_way("batched", times=2, tries=batched)),
        db.write(insert("last")),
    )
    assert results == ["first", "batched", "last"]
    assert (len(alone), len(batched)) == (2, 3)
    assert await stored(db) == ["alone", "batched", "first", "last"]


async def test_a_unit_that_keeps_giving_way_gets_the_error_alone(db: Db) -> None:
    tries: list[int] = []
    results = await asyncio.gather(
        db.write(insert("kept")),
        db.write(giving_way("lost", times=99, tries=tries)),
        return_exceptions=True,
    )
    assert results[0] == "kept"
    assert isinstance(results[1], MustRetry)
    assert len(tries) == RETRIES
    assert await stored(db) == ["kept"]
