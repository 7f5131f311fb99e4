"""Prepared statements answer exactly as Connection.execute does, on either database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Connection, bindparam, event, insert, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.sqlite.base import DATETIME
from sqlalchemy.exc import IntegrityError, InvalidRequestError

from relay.db.engine import Database
from relay.db.prepared import Prepared
from relay.db.tables import UtcDateTime, events

E = events.c
NOW = datetime(2026, 11, 21, 8, 30, 15, 123456, tzinfo=UTC)

_INSERT_EVENT = insert(events)
_EVENT = select(E.id, E.type, E.payload, E.livemode, E.created_at, E.next_attempt_at).where(
    E.id == bindparam("event_id"), E.delivery_status == "pending"
)
_DELIVER = (
    update(events)
    .where(E.id == bindparam("event_id"), E.delivery_status == "pending")
    .values(delivery_status="delivered", next_attempt_at=bindparam("at", type_=UtcDateTime()))
    .returning(E.id, E.next_attempt_at)
)


def event_row(event_id: str) -> dict[str, Any]:
    return {
        "id": event_id,
        "account_id": "acct_1",
        "livemode": False,
        "type": "verification.approved",
        "related_id": "ver_1",
        "payload": '{"id": "evt"}',
        "webhook_url": None,
        "delivery_status": "pending",
        "created_at": NOW,
        "next_attempt_at": NOW,
    }


@pytest.mark.asyncio
async def test_a_prepared_select_reads_the_same_typed_values_as_core(db: Database) -> None:
    await db.write(lambda c: Prepared(_INSERT_EVENT).execute(c, event_row("evt_1")))

    def both(conn: Connection) -> tuple[Any, Any]:
        params = {"event_id": "evt_1"}
        return Prepared(_EVENT).execute(conn, params).first(), conn.execute(_EVENT, params).first()

    prepared, core = await db.read(both)

    assert prepared is not None
    assert core is not None
    assert tuple(prepared) == tuple(core)
    assert prepared.created_at == NOW
    assert prepared.created_at.tzinfo is not None
    assert (prepared.id, prepared.livemode) == ("evt_1", False)


@pytest.mark.asyncio
async def test_a_prepared_update_counts_rows_and_returns_what_it_changed(db: Database) -> None:
    statement = Prepared(_DELIVER)
    await db.write(lambda c: conn_insert(c, "evt_2"))
    later = datetime(2026, 11, 22, tzinfo=UTC)

    first = await db.write(lambda c: statement.execute(c, {"event_id": "evt_2", "at": later}))
    again = await db.write(lambda c: statement.execute(c, {"event_id": "evt_2", "at": later}))

    assert first.rowcount == 1
    assert [tuple(r) for r in first] == [("evt_2", later)]
    assert again.rowcount == 0
    assert again.first() is None


def conn_insert(conn: Connection, event_id: str) -> None:
    Prepared(_INSERT_EVENT).execute(conn, event_row(event_id))


@pytest.mark.asyncio
async def test_a_duplicate_key_raises_sqlalchemys_integrity_error_and_rolls_back(
    db: Database,
) -> None:
    await db.write(lambda c: conn_insert(c, "evt_3"))

    def twice(conn: Connection) -> None:
        conn_insert(conn, "evt_4")
        conn_insert(conn, "evt_3")

    with pytest.raises(IntegrityError):
        await db.write(twice)
    found = await db.read(lambda c: Prepared(_EVENT).execute(c, {"event_id": "evt_4"}).first())
    assert found is None


@pytest.mark.asyncio
async def test_statement_listeners_see_prepared_statements(db: Database) -> None:
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(str(args[2]).split()[0])

    for engine in db.engines:  # type: ignore[attr-defined]
        event.listen(engine, "before_cursor_execute", record)
    await db.read(lambda c: Prepared(_EVENT).execute(c, {"event_id": "evt_x"}))
    assert seen == ["SELECT"]


@pytest.mark.asyncio
async def test_an_expanding_in_list_is_refused(db: Database) -> None:
    statement = Prepared(select(E.id).where(E.id.in_(bindparam("ids", expanding=True))))
    with pytest.raises(ValueError, match="expanding"):
        await db.read(lambda c: statement.execute(c, {"ids": ["evt_1"]}))


@pytest.mark.asyncio
async def test_a_missing_parameter_is_refused_rather_than_bound_as_null(db: Database) -> None:
    with pytest.raises(InvalidRequestError, match="event_id"):
        await db.read(lambda c: Prepared(_EVENT).execute(c, {}))


@pytest.mark.asyncio
async def test_execute_many_writes_every_row_as_core_executemany_does(db: Database) -> None:
    ours = [event_row(f"evt_m{i}") for i in range(3)]
    cores = [event_row(f"evt_c{i}") for i in range(3)]

    def write(conn: Connection) -> None:
        Prepared(_INSERT_EVENT).execute_many(conn, ours)
        conn.execute(_INSERT_EVENT, cores)

    await db.write(write)

    def read(conn: Connection) -> list[tuple[Any, ...]]:
        statement = Prepared(_EVENT)
        found = []
        for i in range(3):
            for name in (f"evt_m{i}", f"evt_c{i}"):
                row = statement.execute(conn, {"event_id": name}).first()
                assert row is not None, name
                found.append(tuple(row)[1:])
        return found

    rows = await db.read(read)
    assert len(rows) == 6
    assert all(row == rows[0] for row in rows)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 21, 8, 30, 15, 123456, tzinfo=UTC),
        datetime(2026, 11, 21, 8, 30, 15, tzinfo=UTC),
        datetime(2026, 1, 1, 2, 0, 0, 7, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
def test_utc_datetimes_reach_sqlite_as_the_text_sqlalchemy_would_write(moment: datetime) -> None:
    dialect = sqlite.dialect()
    ours = UtcDateTime().dialect_impl(dialect).bind_processor(dialect)
    theirs = DATETIME().bind_processor(dialect)
    assert ours is not None
    assert theirs is not None
    assert ours(moment) == theirs(moment.astimezone(UTC).replace(tzinfo=None))


def test_a_naive_datetime_is_refused_on_sqlite_too() -> None:
    dialect = sqlite.dialect()
    process = UtcDateTime().dialect_impl(dialect).bind_processor(dialect)
    assert process is not None
    with pytest.raises(ValueError, match="naive"):
        process(datetime(2026, 11, 21, 8, 30))
