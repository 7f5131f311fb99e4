"""Statements written once for both databases, and the transaction they run in.

A statement names its parameters `:name`; it is rendered once, when the
module that declares it is imported, into each driver's numbered form (`?1`
for sqlite3, `$1` for asyncpg), so running it is one tuple build and one
driver call. Where the two dialects differ (SKIP LOCKED, say), a statement
carries a text of its own for PostgreSQL.

Values cross the edge in one shape on both databases: aware UTC datetimes,
bools, dicts and lists (JSON), bytes, str, int. `bind` makes the driver's form
of a value and `moment`, `document` and `flag` (`relay.db.columns`) read a column
back.
"""

from __future__ import annotations

import functools
import json
import operator
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

import orjson

from relay.clock import SecondTexts
from relay.db.columns import document as document
from relay.db.columns import flag as flag
from relay.db.columns import moment as moment
from relay.db.columns import moment_or_none as moment_or_none

if TYPE_CHECKING:
    from relay.db.sums import HeldSums

Dialect = Literal["sqlite", "postgresql"]
Params = Mapping[str, Any]

# A quoted literal, a PostgreSQL cast, or a parameter: literals and casts are
# matched only so that a colon inside them is never read as a parameter.
_TOKENS = re.compile(r"'(?:[^']|'')*'|::|(?<![:\w]):([A-Za-z_]\w*)")


class Row(Protocol):
    """A result row, by column name (sqlite3.Row and asyncpg.Record both are one)."""

    def __getitem__(self, key: str, /) -> Any: ...


class IntegrityViolation(Exception):
    """A unique or foreign-key constraint refused the write."""


class MustRetry(Exception):
    """The database made this unit give way (a deadlock victim): running it again may succeed."""


class DatabaseUnavailable(Exception):
    """The database could not be reached or refused the connection."""


def _numbered(text: str, mark: str) -> tuple[str, tuple[str, ...]]:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)
        if name not in names:
            names.append(name)
        return f"{mark}{names.index(name) + 1}"

    return _TOKENS.sub(number, text), tuple(names)


Take = Callable[[Params], tuple[Any, ...]]


class Sql:
    """One statement, rendered for each driver when it is declared."""

    __slots__ = (
        "columns",
        "converted",
        "names",
        "postgres",
        "postgres_names",
        "sqlite",
        "take_postgres",
        "take_sqlite",
        "text",
        "wide",
    )

    def __init__(self, text: str, *, postgres: str | None = None, wide: bool = False) -> None:
        self.text = " ".join(text.split())
        self.sqlite, self.names = _numbered(self.text, "?")
        pg_text = self.text if postgres is None else " ".join(postgres.split())
        self.postgres, self.postgres_names = _numbered(pg_text, "$")
        # The parameters' values in the driver's order, by one C call (`values`).
        self.take_sqlite = _taker(self.names)
        self.take_postgres = _taker(self.postgres_names)
        # The dialects for which a value of this statement has needed `bind`'s mapping.
        self.converted: set[Dialect] = set()
        # Rows of many columns, each read by its exact name several times: sqlite3's rows
        # find a name by comparing it with every column before it, so SQLite hands each
        # of these over as a dict (read by name only, as written in the statement).
        self.wide = wide
        # A wide statement's column names, as SQLite first named them (`relay.db.sqlite`).
        self.columns: list[str] | None = None

    def __repr__(self) -> str:
        return f"Sql({self.text!r})"


# Called with every statement a Tx runs and its parameters (an executemany's first
# row): the statement-count and query-plan tests and the benches listen.
Trace = Callable[[Sql, Params | None], None]


class Tx(Protocol):
    """The connection a unit of work runs on, inside its transaction."""

    dialect: Dialect

    def notify(self, channel: str) -> None:
        """Wake the channel's listeners once this unit has committed (never if it rolls back)."""
        ...

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call `callback` once this unit has committed (never if it rolls back); write units
        only. It runs on the writer, before the unit's caller is answered: keep it short."""
        ...

    async def execute(self, statement: Sql, params: Params | None = None) -> int:
        """Run a statement; the number of rows it changed."""
        ...

    async def executemany(self, statement: Sql, rows: Sequence[Params]) -> None: ...

    async def fetch(self, statement: Sql, params: Params | None = None) -> list[Row]: ...

    async def fetchrow(self, statement: Sql, params: Params | None = None) -> Row | None: ...

    async def add_up(
        self, statement: Sql, rows: Sequence[dict[str, Any]], counts: tuple[str, ...]
    ) -> None:
        """Upserts that add `counts` to rows (`relay.db.sums`): a writer holds them, summed
        with the batch's others for the same row, until the batch's end. The rows are
        taken over (summed into)."""
        ...

    def held(self, statement: Sql) -> list[dict[str, Any]]:
        """The rows `add_up` holds for `statement`, not yet written: each its sum so far."""
        ...


@dataclass
class Notices:
    """What units asked for once they have committed: channels to wake, callbacks to run."""

    channels: set[str] = field(default_factory=set)
    callbacks: list[Callable[[], None]] = field(default_factory=list)

    def __ior__(self, other: Notices) -> Notices:
        self.channels |= other.channels
        self.callbacks += other.callbacks
        return self


class Channels:
    """What every Tx shares: what its current unit asked for after commit, the tracer,
    and turning a statement's parameters into its driver's values."""

    dialect: Dialect

    def __init__(self, trace: Trace | None = None) -> None:
        self.notified = Notices()
        self.trace = trace
        # A writer's additions held until its batch's end; None: written at once.
        self.sums: HeldSums | None = None

    async def executemany(self, statement: Sql, rows: Sequence[Params]) -> None:
        raise NotImplementedError

    async def add_up(
        self, statement: Sql, rows: Sequence[dict[str, Any]], counts: tuple[str, ...]
    ) -> None:
        if self.sums is None:
            await self.executemany(statement, rows)
        else:
            self.sums.add(statement, rows, counts)

    def held(self, statement: Sql) -> list[dict[str, Any]]:
        return [] if self.sums is None else self.sums.held(statement)

    async def write_held(self) -> None:
        """Write what `add_up` held (before COMMIT)."""
        if self.sums is not None:
            for statement, rows in self.sums.take():
                await self.executemany(statement, rows)

    def traced(self, statement: Sql, params: Params | None) -> Sql:
        """Tell the tracer, if any, that `statement` runs."""
        if self.trace is not None:
            self.trace(statement, params)
        return statement

    def bound(self, statement: Sql, params: Params | None) -> tuple[Any, ...]:
        """The statement's values for this driver (the statement traced)."""
        return values(self.traced(statement, params), params, self.dialect)

    def bound_rows(self, statement: Sql, rows: Sequence[Params]) -> list[tuple[Any, ...]]:
        """Values for each row of an executemany (traced once: one statement)."""
        self.traced(statement, rows[0] if rows else None)
        return [values(statement, row, self.dialect) for row in rows]

    def notify(self, channel: str) -> None:
        self.notified.channels.add(channel)

    def after_commit(self, callback: Callable[[], None]) -> None:
        self.notified.callbacks.append(callback)

    def take_notified(self) -> Notices:
        taken, self.notified = self.notified, Notices()
        return taken


# Values the drivers take as they are: most of every statement's parameters.
_AS_IS = frozenset({str, int, bool, bytes, float, type(None)})


# What sqlite3 binds without asking its adapter registry first: a bool, bytes or None
# goes through that registry's lookups, several times the bind's own cost.
_SQLITE_AS_IS = frozenset({str, int, float, bytearray, type(None)})
# What sqlite3 binds by an adapter registered below, found at the registry's first
# look-up: a statement whose values are all of these or the above is handed over as
# taken, without a Python pass over its values.
_SQLITE_ADAPTED = _SQLITE_AS_IS | {bool, bytes, datetime}


def bind(value: Any, dialect: Dialect) -> Any:
    """The driver's form of a value."""
    kind = type(value)
    if kind in _AS_IS:
        if dialect == "sqlite":
            # Stored as they would be: a bool as the integer, bytes as a BLOB.
            if kind is bool:
                return int(value)
            if kind is bytes:
                return bytearray(value)
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored")
        return value if dialect == "postgresql" else _sqlite_text(value)
    if isinstance(value, dict | list):
        return json_text(value)
    return value


def json_text(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> str:
    """The value as JSON text, as `bind` writes a JSON column's (a store that binds this
    text spares its statement a pass in Python over its values), by orjson (a seventh
    of `json.dumps`' cost). What orjson refuses or would write otherwise is
    `json.dumps`' to write or refuse, as before: a key that is not a string, an integer
    past 64 bits, a datetime, a dataclass, and a NaN or infinity (null to orjson, so any
    text with a null)."""
    try:
        text = orjson.dumps(value, option=_STRICT).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value)
    return json.dumps(value) if "null" in text else text


_STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


@functools.lru_cache(maxsize=256)
def _sqlite_text(value: datetime) -> str:
    """The text SQLAlchemy's DATETIME wrote into rows of earlier versions: sortable, so
    range conditions compare it as text. Cached: a unit binds its `now` many times.

    A unit binds a few moments of its own (now, an expiry, a window's start), each
    missing the cache: the text up to the second is kept per second, and only the
    microseconds are written for each (a datetime's `isoformat` costs three times it)."""
    if value.tzinfo is not UTC:
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored")
        value = value.astimezone(UTC)
    return f"{_SPACE_SECONDS.text(value)}.{value.microsecond:06d}"


# "YYYY-MM-DD HH:MM:SS": a process binds a few moments each second.
_SPACE_SECONDS = SecondTexts(" ")

# sqlite3's adapters for the process (its registry is process-wide), each a C call on
# the way: a bool as its integer, bytes as a BLOB (as sqlite3 binds them after its
# look-ups fail), a datetime as `_sqlite_text` writes it (not sqlite3's own default
# adapter's ISO text with an offset; a naive one is refused).
sqlite3.register_adapter(bool, int)
sqlite3.register_adapter(bytes, bytearray)
sqlite3.register_adapter(datetime, _sqlite_text)


def values(statement: Sql, params: Params | None, dialect: Dialect) -> tuple[Any, ...]:
    if dialect == "sqlite":
        names, take, handed = statement.names, statement.take_sqlite, _SQLITE_ADAPTED
        as_is = _SQLITE_AS_IS
    else:
        names, take, handed = statement.postgres_names, statement.take_postgres, _AS_IS
        as_is = _AS_IS
    if not names:
        return ()
    if params is None:
        raise KeyError(f"{statement!r} needs {', '.join(names)}")
    taken = take(params)
    # Every statement binds its values, most of them already the driver's: the types
    # are checked in one set operation while they all have been; a statement that has
    # bound another (a datetime, a document) maps each value that is not.
    if dialect not in statement.converted:
        if handed.issuperset(map(type, taken)):
            return taken
        statement.converted.add(dialect)
    if dialect == "sqlite":
        # A bool (a mode, in most statements) and an aware datetime as `bind` makes them,
        # without its call.
        return tuple(
            [
                value
                if type(value) in as_is
                else (1 if value else 0)
                if type(value) is bool
                else _sqlite_text(value)
                if type(value) is datetime and value.tzinfo is not None
                else bind(value, dialect)
                for value in taken
            ]
        )
    return tuple([value if type(value) in as_is else bind(value, dialect) for value in taken])


def _taker(names: tuple[str, ...]) -> Take:
    if len(names) == 1:
        name = names[0]
        return lambda params: (params[name],)
    # itemgetter of no names would take nothing; `values` never calls it then.
    return operator.itemgetter(*names) if names else lambda params: ()
