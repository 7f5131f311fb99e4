"""Statements are written once with :name parameters and rendered for each driver."""

from __future__ import annotations

import json
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from relay.db.sql import Dialect, Sql, bind, document, moment, values
from relay.db.sqlite import connect


def test_parameters_become_numbered_for_each_driver() -> None:
    statement = Sql("UPDATE t SET a = :a, b = :b WHERE id = :id AND a < :a")
    assert statement.sqlite == "UPDATE t SET a = ?1, b = ?2 WHERE id = ?3 AND a < ?1"
    assert statement.postgres == "UPDATE t SET a = $1, b = $2 WHERE id = $3 AND a < $1"
    assert statement.names == ("a", "b", "id")


def test_casts_and_quoted_colons_are_not_parameters() -> None:
    statement = Sql("SELECT ':nope', x::text FROM t WHERE y = :yes")
    assert statement.postgres == "SELECT ':nope', x::text FROM t WHERE y = $1"
    assert statement.names == ("yes",)


def test_a_dialect_text_of_its_own_keeps_its_parameters() -> None:
    statement = Sql(
        "SELECT id FROM t WHERE due < :now LIMIT :n",
        postgres="SELECT id FROM t WHERE due < :now LIMIT :n FOR UPDATE SKIP LOCKED",
    )
    assert statement.sqlite == "SELECT id FROM t WHERE due < ?1 LIMIT ?2"
    assert statement.postgres.endswith("LIMIT $2 FOR UPDATE SKIP LOCKED")


def test_a_missing_parameter_is_refused() -> None:
    with pytest.raises(KeyError):
        values(Sql("SELECT :a, :b"), {"a": 1}, "sqlite")


def test_sqlite_keeps_utc_datetimes_as_sortable_text() -> None:
    paris = timezone(timedelta(hours=1))
    at = datetime(2026, 3, 1, 13, 0, 0, 5, tzinfo=paris)
    assert bind(at, "sqlite") == "2026-03-01 12:00:00.000005"
    assert moment(bind(at, "sqlite")) == at
    assert moment(bind(at, "sqlite")).tzinfo is UTC


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        bind(datetime(2026, 1, 1), "postgresql")


def test_json_values_round_trip_as_text() -> None:
    assert document(bind({"a": ["b", 1]}, "postgresql")) == {"a": ["b", 1]}


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_values_come_in_the_drivers_order_each_in_the_drivers_form(dialect: Dialect) -> None:
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    statement = Sql("SELECT :b, :a, :at, :doc, :b, :none, :flag, :raw")
    params = {"a": 1, "b": "x", "at": at, "doc": {"k": [1]}, "none": None, "flag": True}
    params |= {"raw": b"\x00", "unused": object()}
    expected = ("x", 1, bind(at, dialect), '{"k":[1]}', None, True, b"\x00")
    assert values(statement, params, dialect) == expected
    assert values(Sql("SELECT 1"), None, dialect) == ()


def test_sqlite_is_handed_a_statement_of_bools_bytes_and_datetimes_as_taken() -> None:
    # sqlite3's adapters, registered by `relay.db.sql`, make the driver's form of each.
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    params = {"at": at, "flag": True, "raw": b"\x00", "n": 1}
    assert values(Sql("SELECT :at, :flag, :raw, :n"), params, "sqlite") == (at, True, b"\x00", 1)


def test_sqlite_stores_a_datetime_as_the_text_bind_makes_and_refuses_a_naive_one() -> None:
    paris = timezone(timedelta(hours=1))
    at = datetime(2026, 3, 1, 13, 0, 0, 5, tzinfo=paris)
    statement = Sql("SELECT typeof(:at), :at")
    with closing(connect(":memory:")) as connection:
        args = values(statement, {"at": at}, "sqlite")
        row = tuple(connection.execute(statement.sqlite, args).fetchone())
        assert row == ("text", "2026-03-01 12:00:00.000005")
        naive = values(statement, {"at": datetime(2026, 1, 1)}, "sqlite")
        with pytest.raises(ValueError, match="naive"):
            connection.execute(statement.sqlite, naive)


def test_sqlite_stores_a_bool_bytes_and_none_as_an_integer_a_blob_and_null() -> None:
    with closing(connect(":memory:")) as connection:
        statement = Sql("SELECT typeof(:flag), :flag, typeof(:raw), :raw, typeof(:none), :none")
        args = values(statement, {"flag": True, "raw": b"\x00", "none": None}, "sqlite")
        row = tuple(connection.execute(statement.sqlite, args).fetchone())
    assert row == ("integer", 1, "blob", b"\x00", "null", None)
    assert type(row[3]) is bytes


@given(st.datetimes(timezones=st.just(UTC)))
def test_a_datetime_reads_back_from_sqlites_text_as_it_was_written(at: datetime) -> None:
    assert moment(bind(at, "sqlite")) == at
    assert moment(bind(at, "sqlite")).tzinfo is UTC


@given(st.builds(datetime.isoformat, st.datetimes(), st.sampled_from(" T")))
@example("2026-11-28")
@example("2026-11-28 10:11")
@example("2026-11-28T10:11:12Z")
@example("2026-11-28 10:11:12+02:00")
@example("2026-11-28+05:00")
def test_any_text_of_a_datetime_reads_as_that_time_in_utc(text: str) -> None:
    expected = datetime.fromisoformat(text).replace(tzinfo=UTC)
    assert moment(text) == expected
    assert moment(text).tzinfo is UTC


def test_a_datetime_from_the_driver_reads_as_aware_utc() -> None:
    paris = timezone(timedelta(hours=1))
    at = datetime(2026, 3, 1, 13, 0, tzinfo=paris)
    assert moment(at) == at
    assert moment(at).tzinfo is UTC
    assert moment(at.astimezone(UTC)) == at
    assert moment(datetime(2026, 3, 1, 12, 0)) == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-9, minutes=-30))]),
    )
)
@example(datetime(1, 1, 2, tzinfo=UTC))
@example(datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC))
@example(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
def test_sqlites_text_of_a_datetime_is_its_utc_time_to_the_microsecond(at: datetime) -> None:
    expected = at.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    assert bind(at, "sqlite") == expected
    assert bind(at + timedelta(microseconds=1), "sqlite") > expected


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text() | st.integers(-5, 5), inner, max_size=4)
    ),
    max_leaves=20,
)


def same(found: Any, expected: Any) -> bool:
    """Equal, NaN and all (repr tells NaN, -0.0 and the types apart)."""
    return repr(found) == repr(expected)


@given(st.dictionaries(st.text(), json_values, max_size=4) | st.lists(json_values, max_size=4))
@example({"id": 2**70, "big": -(2**64)})
@example([float("nan"), float("inf"), "\ud800"])
@example({1: "a", None: "b"})
def test_a_json_value_is_written_as_json_reads_it_and_read_as_json_reads_the_text(
    value: dict[Any, Any] | list[Any],
) -> None:
    text = bind(value, "sqlite")
    assert same(json.loads(text), json.loads(json.dumps(value)))
    assert same(document(text), json.loads(text))
    assert same(document(json.dumps(value)), json.loads(json.dumps(value)))
    assert same(document(json.dumps(value).encode("utf-8", "surrogatepass")), json.loads(text))


def test_what_json_cannot_write_is_refused_as_before() -> None:
    with pytest.raises(TypeError):
        bind({"at": datetime(2026, 1, 1, tzinfo=UTC)}, "sqlite")
